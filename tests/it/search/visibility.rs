//! Read-your-writes: every write is seen by the next search in another process.

use super::{contents, keys, rows, search};
use crate::util::TestEnv;

#[test]
fn every_write_is_seen_by_the_next_search_in_another_process() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "first words"]);
    assert_eq!(search(&env, &["zanzibar"])["count"], 0);
    // A chunk ingested by one process is found by the next.
    env.ok(&["ingest", "--session-id", "s", "--text", "the zanzibar plan"]);
    let v = search(&env, &["zanzibar"]);
    assert_eq!(contents(&v)[0], "the zanzibar plan");
    let v = search(&env, &["zanzibar", "--mode", "exact"]);
    assert_eq!(contents(&v), vec!["the zanzibar plan"]);
    // A batch into a new session.
    env.ok_stdin(
        &["ingest", "--jsonl", "-"],
        b"{\"session_id\": \"t\", \"content\": \"zanzibar again\"}\n{\"session_id\": \"t\", \"content\": \"and ECONNRESET\"}\n",
    );
    assert_eq!(search(&env, &["zanzibar", "--mode", "exact"])["count"], 2);
    assert_eq!(search(&env, &["ECONNRESET"])["engine"], "exact");
    // A category write.
    env.ok(&["write", "pets", "--data", r#"{"name": "quokka"}"#]);
    let v = search(&env, &["quokka"]);
    assert_eq!(keys(&v), vec!["pets:name"]);
    // A merge replaces the value: the new one is found, the old one is gone.
    env.ok(&[
        "write",
        "pets",
        "--merge",
        "--data",
        r#"{"name": "wombat"}"#,
    ]);
    assert_eq!(keys(&search(&env, &["wombat"])), vec!["pets:name"]);
    assert_eq!(search(&env, &["quokka"])["count"], 0);
    // A full replace drops a key.
    env.ok(&["write", "pets", "--data", r#"{"other": "capybara"}"#]);
    assert_eq!(search(&env, &["wombat"])["count"], 0);
    assert_eq!(keys(&search(&env, &["capybara"])), vec!["pets:other"]);
    // A log append.
    env.ok(&[
        "append",
        "journal",
        "--data",
        r#"{"event": "axolotl spotted"}"#,
    ]);
    let v = search(&env, &["axolotl"]);
    assert_eq!(rows(&v).len(), 1);
    assert_eq!(rows(&v)[0]["category"], "journal");
    // A delete.
    env.ok(&["delete", "pets"]);
    assert_eq!(search(&env, &["capybara"])["count"], 0);
    env.assert_clean();
}
