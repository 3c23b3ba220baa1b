//! Sync over HTTP: replicas that sync with a memory directory served by `memdir serve
//! --transport http` (loopback, started by each test).

use serde_json::{Value, json};

use crate::sync::{Acked, assert_acked, assert_identical, random_op};
use crate::util::{Rng, Served, TestEnv};

pub(crate) const TOKEN: &str = "sync-test-token-0123456789abcdef0123456789";

/// A running `memdir serve --transport http` over one replica's store.
pub(crate) fn replica(i: usize) -> TestEnv {
    let mut e = TestEnv::new();
    e.set_env("MEMDIR_DEVICE", &format!("device{i}"));
    e.set_env("MEMDIR_SEED", &format!("seed{i}"));
    e.set_env("SYNC_TOKEN", TOKEN);
    e
}

/// Syncs `e` with the server and checks the report says both sides agree.
pub(crate) fn sync(e: &TestEnv, url: &str) -> Value {
    let v = e.ok(&["sync", "--remote", url, "--token-env", "SYNC_TOKEN"]);
    assert_eq!(v["pushed"], json!(true), "{v:#}");
    v
}

/// The files of a store that a sync exchanges or derives, by path.
fn store_files(e: &TestEnv) -> std::collections::BTreeMap<String, Vec<u8>> {
    e.snapshot()
        .into_iter()
        .filter(|(p, _)| !p.starts_with(".memdir/"))
        .collect()
}

#[test]
fn three_replicas_converge_over_http_after_random_offline_work() {
    for seed in [3u64, 11] {
        // Replica 0 is the served store; 1 and 2 sync with it.
        let replicas: Vec<TestEnv> = (0..3).map(replica).collect();
        replicas[0].ok(&["write", "shared", "--data", r#"{"a":1,"b":1}"#]);
        let server = Served::start(&replicas[0], &["--token", TOKEN]);
        for r in &replicas[1..] {
            sync(r, &server.url);
        }
        let mut rng = Rng(seed);
        let mut acked = Acked::default();
        let mut n = 0;
        for round in 0..4 {
            for _ in 0..12 {
                n += 1;
                random_op(&replicas, &mut rng, n, round, &mut acked);
            }
            // Syncs in a random order (replica 0 is the server: its writes are simply there).
            for _ in 0..3 {
                let i = rng.below(3) as usize;
                if i > 0 {
                    sync(&replicas[i], &server.url);
                }
            }
        }
        for _ in 0..2 {
            for r in &replicas[1..] {
                sync(r, &server.url);
            }
        }
        // A converged store answers a sync at once: one round, nothing moved.
        let v = sync(&replicas[1], &server.url);
        assert_eq!(
            (
                v["rounds"].clone(),
                v["files_sent"].clone(),
                v["files_received"].clone()
            ),
            (json!(1), json!(0), json!(0)),
            "{v:#}"
        );
        assert_identical(&replicas);
        assert_acked(&replicas, &acked, seed);
    }
}

#[test]
fn a_client_killed_mid_sync_converges_on_the_next_sync() {
    let replicas: Vec<TestEnv> = (0..2).map(replica).collect();
    for (i, r) in replicas.iter().enumerate() {
        r.ok(&["write", "doc", "--data", &format!(r#"{{"side":{i}}}"#)]);
        for k in 0..5 {
            r.ok(&[
                "ingest",
                "--session-id",
                &format!("s{k}"),
                "--text",
                &format!("word{i}x{k}"),
            ]);
        }
    }
    let server = Served::start(&replicas[0], &["--token", TOKEN]);
    for point in ["sync.http.after_pull_page", "sync.http.after_push_page"] {
        replicas[1].ok(&[
            "append",
            "events",
            "--data",
            &format!(r#"{{"at":"{point}"}}"#),
        ]);
        replicas[0].ok(&["ingest", "--session-id", "s0", "--text", point]);
        let raw = replicas[1].run_env(
            &["sync", "--remote", &server.url, "--token-env", "SYNC_TOKEN"],
            &[("MEMDIR_FAILPOINT", point)],
            b"",
        );
        assert!(
            raw.signal.is_some(),
            "{point}: the client was not killed: {}",
            raw.run.stderr
        );
        sync(&replicas[1], &server.url);
    }
    assert_identical(&replicas);
    let hits = replicas[1].ok(&["search", "word0x3"]);
    assert_eq!(hits["results"][0]["content"], json!("word0x3"), "{hits:#}");
}

#[test]
fn a_corrupted_page_is_refused_and_changes_nothing() {
    let replicas: Vec<TestEnv> = (0..2).map(replica).collect();
    replicas[0].ok(&["write", "doc", "--data", r#"{"a":1}"#]);
    replicas[0].ok(&["ingest", "--session-id", "s", "--text", "served text"]);
    replicas[1].ok(&["write", "mine", "--data", r#"{"b":2}"#]);
    // Pages the server sends are damaged in transit: the client refuses them.
    let mut bad_server_env = replica(0);
    bad_server_env.dir = replicas[0].dir.clone();
    bad_server_env.set_env("MEMDIR_DIR", &replicas[0].dir.display().to_string());
    bad_server_env.set_env("MEMDIR_FAILPOINT", "sync.page=corrupt");
    let before = store_files(&replicas[1]);
    {
        let server = Served::start(&bad_server_env, &["--token", TOKEN]);
        let err = replicas[1].fail(
            &["sync", "--remote", &server.url, "--token-env", "SYNC_TOKEN"],
            7,
        );
        assert_eq!(err["code"], json!("corrupt"), "{err:#}");
        assert!(
            err["message"].as_str().unwrap().contains("BLAKE3"),
            "{err:#}"
        );
    }
    assert_eq!(
        store_files(&replicas[1]),
        before,
        "a refused page changed the client"
    );
    // A damaged page pushed to the server: refused whole with 422, nothing applied.
    let server = Served::start(&replicas[0], &["--token", TOKEN]);
    let before = store_files(&replicas[0]);
    let line = "{\"a\":1}\n";
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let body = json!({"items": [
        {"path": "sessions/x/device1-aaaa.jsonl", "from": 0, "hash": blake3::hash(line.as_bytes()).to_hex().to_string(), "data": line},
        {"path": "sessions/y/device1-aaaa.jsonl", "from": 0, "hash": blake3::hash(b"other").to_hex().to_string(), "data": line},
    ]});
    let mut resp = agent
        .post(&format!("{}/api/v1/sync/push", server.url))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .send_json(&body)
        .unwrap();
    assert_eq!(resp.status().as_u16(), 422);
    let v: Value = serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(v["error"]["code"], json!("corrupt"), "{v:#}");
    assert_eq!(
        store_files(&replicas[0]),
        before,
        "a refused push changed the server"
    );
    // Undamaged, the sync goes through.
    sync(&replicas[1], &server.url);
    assert_identical(&replicas);
}

#[test]
fn a_bad_token_is_a_clear_error() {
    let replicas: Vec<TestEnv> = (0..2).map(replica).collect();
    replicas[0].ok(&["write", "doc", "--data", r#"{"a":1}"#]);
    let server = Served::start(&replicas[0], &["--token", TOKEN]);
    let mut client = replica(1);
    client.set_env("SYNC_TOKEN", "not-the-token-0123456789abcdef0123456789");
    client.ok(&["write", "mine", "--data", r#"{"b":2}"#]);
    let before = store_files(&client);
    let err = client.fail(
        &["sync", "--remote", &server.url, "--token-env", "SYNC_TOKEN"],
        11,
    );
    assert_eq!(err["code"], json!("denied"), "{err:#}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("refused the token"),
        "{err:#}"
    );
    assert_eq!(store_files(&client), before);
    // A variable that is not set is named.
    let err = client.fail(
        &[
            "sync",
            "--remote",
            &server.url,
            "--token-env",
            "NO_SUCH_VAR",
        ],
        3,
    );
    assert!(
        err["message"].as_str().unwrap().contains("NO_SUCH_VAR"),
        "{err:#}"
    );
}

/// A store of device `hub` (its admin) that serves device `laptop` with token [`TOKEN`], under
/// `acl`: the rest of the `[acl]` table after `admin_devices`, with its rules.
fn hub_for_laptop(acl: &str) -> TestEnv {
    let mut hub = replica(0);
    hub.set_env("MEMDIR_DEVICE", "hub");
    let cfg = hub.tmp.path().join("home/cfg.toml");
    std::fs::write(
        &cfg,
        format!(
            "[acl]\nadmin_devices = [\"hub\"]\n{acl}\n\n[[http.tokens]]\ndevice = \"laptop\"\ntoken_env = \"LAPTOP_TOKEN\"\n"
        ),
    )
    .unwrap();
    hub.set_env("MEMDIR_CONFIG", &cfg.display().to_string());
    hub.set_env("LAPTOP_TOKEN", TOKEN);
    hub
}

#[test]
fn a_device_pulls_only_what_it_may_read_and_a_forbidden_push_is_refused_whole() {
    let hub = hub_for_laptop(
        r#"device_categories = ["laptop"]

[[acl.rules]]
device = "laptop"
read = ["laptop", "notes_*"]
write = ["notes_*"]"#,
    );
    hub.ok(&["write", "secret", "--data", r#"{"code":42}"#]);
    hub.ok(&["write", "notes_a", "--data", r#"{"n":1}"#]);
    let server = Served::start(&hub, &[]);
    let mut laptop = replica(1);
    laptop.set_env("MEMDIR_DEVICE", "laptop");
    // Reads: the hidden category never arrives.
    sync(&laptop, &server.url);
    assert!(laptop.path("history/notes_a").exists());
    assert!(!laptop.path("history/secret").exists());
    assert!(!laptop.path("categories/secret.json").exists());
    // Writes: an allowed and a forbidden change together; the sync is refused whole.
    laptop.ok(&["write", "notes_b", "--data", r#"{"n":2}"#]);
    laptop.ok(&["write", "base", "--data", r#"{"owned":true}"#]);
    let hub_before = store_files(&hub);
    let err = laptop.fail(
        &["sync", "--remote", &server.url, "--token-env", "SYNC_TOKEN"],
        12,
    );
    assert_eq!(err["code"], json!("forbidden"), "{err:#}");
    assert_eq!(err["rule"], json!("acl.admin_devices"), "{err:#}");
    assert!(
        err["message"].as_str().unwrap().contains("\"base\""),
        "{err:#}"
    );
    assert_eq!(
        store_files(&hub),
        hub_before,
        "a refused push changed the hub"
    );
}

#[test]
fn a_plain_sync_uses_the_configured_remote_and_token() {
    let replicas: Vec<TestEnv> = (0..2).map(replica).collect();
    replicas[0].ok(&["write", "doc", "--data", r#"{"a":1}"#]);
    let server = Served::start(&replicas[0], &["--token", TOKEN]);
    let mut client = replica(1);
    let cfg = client.tmp.path().join("home/cfg.toml");
    std::fs::write(
        &cfg,
        format!(
            "[sync]\nremote = {:?}\ntoken_env = \"SYNC_TOKEN\"\n",
            server.url
        ),
    )
    .unwrap();
    client.set_env("MEMDIR_CONFIG", &cfg.display().to_string());
    let v = client.ok(&["sync"]);
    assert_eq!(v["pushed"], json!(true), "{v:#}");
    assert_eq!(v["remote"], json!(server.url), "{v:#}");
    assert_eq!(client.category_data("doc"), Some(json!({"a": 1})));
}

/// A forget travels over HTTP as it does over git: a segment rewritten on one side (a chunk
/// replaced by its tombstone) and appended on the other travels whole both ways and is merged
/// line by line; every replica ends with the same bytes, and the forgotten text leaves the
/// other side's files, index and ledger.
#[test]
fn a_forget_on_either_side_travels_over_http() {
    let replicas: Vec<TestEnv> = (0..2).map(replica).collect();
    let (server_side, client) = (&replicas[0], &replicas[1]);
    let pad = "with enough words around it that a tombstone is the shorter line";
    for text in [
        format!("first note about the pool {pad}"),
        format!("the quokkasecret token was pasted here {pad}"),
        format!("third note about deploys {pad}"),
        format!("fourth note naming the wombatsecret {pad}"),
    ] {
        server_side.ok(&["ingest", "--session-id", "s", "--text", &text]);
    }
    let server = Served::start(server_side, &["--token", TOKEN]);
    sync(client, &server.url);
    let id = |e: &TestEnv, i: usize| {
        e.ok(&["fetch", "s"])["chunks"][i]["chunk_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // The client forgets a line of the server's segment while the server appends to it.
    let quokka = id(client, 1);
    client.ok(&[
        "forget",
        "--session-id",
        "s",
        "--chunk-id",
        &quokka,
        "--yes",
    ]);
    server_side.ok(&["ingest", "--session-id", "s", "--text", "fifth note after"]);
    let v = sync(client, &server.url);
    assert_eq!(v["reported"], json!([]), "a forget merges cleanly: {v:#}");
    // The server forgets another line; the client's copy is now the longer one.
    let wombat = id(server_side, 3);
    server_side.ok(&[
        "forget",
        "--session-id",
        "s",
        "--chunk-id",
        &wombat,
        "--yes",
    ]);
    let v = sync(client, &server.url);
    assert_eq!(v["reported"], json!([]), "{v:#}");
    assert_identical(&replicas);
    for (name, e) in [("server", server_side), ("client", client)] {
        let seg = std::fs::read_to_string(e.segment_of("s")).unwrap();
        let lines: Vec<Value> = seg
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 5, "{name}: {seg}");
        for i in [1, 3] {
            assert_eq!(lines[i]["content"], "", "{name}: {seg}");
            assert!(lines[i]["metadata"]["forgotten"].is_string(), "{name}");
        }
        assert_eq!(lines[4]["content"], "fifth note after", "{name}");
        for word in ["quokkasecret", "wombatsecret"] {
            assert_eq!(
                e.ok(&["search", word])["results"],
                json!([]),
                "{name} still finds {word}"
            );
            assert_eq!(
                crate::redaction::files_containing(&e.dir, word),
                Vec::<String>::new(),
                "{name} still holds {word}"
            );
        }
        e.assert_clean();
    }
    // Converged: the next sync is one round that moves nothing.
    let v = sync(client, &server.url);
    assert_eq!(
        (
            v["rounds"].clone(),
            v["files_sent"].clone(),
            v["files_received"].clone()
        ),
        (json!(1), json!(0), json!(0)),
        "{v:#}"
    );
}

/// A pushed segment that turns chunks the server holds into tombstones is a forget: a device
/// whose rules do not allow forgetting has it refused whole, naming the rule, and the server's
/// files stay as they were.
#[test]
fn a_pushed_forget_needs_the_right_to_forget() {
    let hub = hub_for_laptop(
        r#"[[acl.rules]]
device = "laptop"
read = ["*"]
write = ["*"]
ingest = ["*"]"#,
    );
    for text in ["first note", "the quokkasecret note", "third note"] {
        hub.ok(&["ingest", "--session-id", "s", "--text", text]);
    }
    let server = Served::start(&hub, &[]);
    let mut laptop = replica(1);
    laptop.set_env("MEMDIR_DEVICE", "laptop");
    sync(&laptop, &server.url);
    let id = laptop.ok(&["fetch", "s"])["chunks"][1]["chunk_id"]
        .as_str()
        .unwrap()
        .to_string();
    laptop.ok(&["forget", "--session-id", "s", "--chunk-id", &id, "--yes"]);
    let before = store_files(&hub);
    let err = laptop.fail(
        &["sync", "--remote", &server.url, "--token-env", "SYNC_TOKEN"],
        12,
    );
    assert_eq!(err["code"], json!("forbidden"), "{err:#}");
    assert_eq!(err["rule"], json!("acl.rules.delete"), "{err:#}");
    assert_eq!(
        store_files(&hub),
        before,
        "a refused forget changed the hub"
    );
    assert_eq!(
        hub.ok(&["search", "quokkasecret"])["results"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // While that forget is pending, every push of the device is refused whole, new chunks too.
    laptop.ok(&["ingest", "--session-id", "own", "--text", "laptop note"]);
    let err = laptop.fail(
        &["sync", "--remote", &server.url, "--token-env", "SYNC_TOKEN"],
        12,
    );
    assert_eq!(
        err["rule"],
        json!("acl.rules.delete"),
        "still refused whole: {err:#}"
    );
}

/// Entries written as patches travel over HTTP both ways, and the store that receives its
/// first patch records the format that reads it in the same transaction.
#[test]
fn patches_travel_over_http_with_the_format_that_reads_them() {
    let replicas: Vec<TestEnv> = (0..2).map(replica).collect();
    let (server_side, client) = (&replicas[0], &replicas[1]);
    let data = Value::Object(crate::patches::big(200)).to_string();
    client.ok(&["write", "big", "--data", &data]);
    client.ok(&["write", "big", "--merge", "--data", r#"{"from_client": 1}"#]);
    server_side.ok(&["write", "other", "--data", &data]);
    assert_eq!(server_side.read("memdir.json"), "{\n  \"format\": 1\n}\n");
    let server = Served::start(server_side, &["--token", TOKEN]);
    sync(client, &server.url);
    assert_eq!(server_side.read("memdir.json"), "{\n  \"format\": 2\n}\n");
    server_side.ok(&[
        "write",
        "other",
        "--merge",
        "--data",
        r#"{"from_server": 1}"#,
    ]);
    sync(client, &server.url);
    assert_identical(&replicas);
    for e in &replicas {
        assert_eq!(e.category_data("big").unwrap()["from_client"], json!(1));
        assert_eq!(e.category_data("other").unwrap()["from_server"], json!(1));
        for (name, n) in [("big", "1"), ("big", "2"), ("other", "2")] {
            assert!(e.ok(&["read", name, "--version", n])["data"].is_object());
        }
    }
    drop(server);
}

/// A client killed after a pulled page's history is committed and before the category files
/// that follow from it are written: its next command derives them (nothing is adopted as a
/// hand edit), and the stores converge.
#[test]
fn a_client_killed_before_settling_a_pulled_page_loses_nothing() {
    let replicas: Vec<TestEnv> = (0..2).map(replica).collect();
    let (server_side, client) = (&replicas[0], &replicas[1]);
    server_side.ok(&["write", "doc", "--data", r#"{"k": 1}"#]);
    let server = Served::start(server_side, &["--token", TOKEN]);
    sync(client, &server.url);
    server_side.ok(&["write", "doc", "--merge", "--data", r#"{"k": 2}"#]);
    server_side.ok(&["write", "fresh", "--data", r#"{"f": 1}"#]);
    client.stopped_at(
        "sync.before_settle",
        &["sync", "--remote", &server.url, "--token-env", "SYNC_TOKEN"],
    );
    assert_eq!(client.category_data("fresh"), Some(json!({"f": 1})));
    assert_eq!(client.category_data("doc"), Some(json!({"k": 2})));
    sync(client, &server.url);
    assert_identical(&replicas);
    let ops = client.ok(&["history", "doc"])["versions"].clone();
    assert!(
        ops.as_array()
            .unwrap()
            .iter()
            .all(|v| v["op"] != "external" && v["op"] != "delete"),
        "{ops:#}"
    );
    drop(server);
}

/// The hub forgot a version that a client then writes a patch on: the patch does not resolve
/// on the hub, which passes over it instead of adopting its file over it, and the client's
/// resolution of the two heads (a whole entry) brings the change to the hub's file.
#[test]
fn a_patch_on_a_version_the_hub_forgot_reaches_the_hub_through_the_clients_resolution() {
    let replicas: Vec<TestEnv> = (0..2).map(replica).collect();
    let (hub, client) = (&replicas[0], &replicas[1]);
    let data = Value::Object(crate::patches::big(200)).to_string();
    hub.ok(&["write", "big", "--data", &data]);
    hub.ok(&["write", "big", "--merge", "--data", r#"{"shared": 1}"#]);
    let server = Served::start(hub, &["--token", TOKEN]);
    sync(client, &server.url);
    hub.ok(&["write", "big", "--merge", "--data", r#"{"from_hub": 1}"#]);
    hub.ok(&["forget", "--category", "big", "--version", "2", "--yes"]);
    client.ok(&["write", "big", "--merge", "--data", r#"{"from_client": 1}"#]);
    client.ok(&[
        "sync",
        "--remote",
        &server.url,
        "--token-env",
        "SYNC_TOKEN",
        "--strategy",
        "merge",
    ]);
    for e in [hub, client] {
        let now = e.category_data("big").unwrap();
        assert_eq!(
            (now["from_hub"].clone(), now["from_client"].clone()),
            (json!(1), json!(1)),
            "{now:#}"
        );
    }
    drop(server);
}
