//! Redaction: secrets and private spans never reach a file under the store or the index, on
//! every path that stores text (ingest one, ingest a batch, category writes, log appends).
//! REST and MCP stdio are covered by `tests/python/test_redaction.py`.

use std::path::Path;

use serde_json::json;

use crate::util::TestEnv;

/// Fake secrets, assembled at run time so that the sources hold none.
struct Secrets {
    aws: String,
    github: String,
    private: String,
    password: String,
    jwt: String,
}

fn secrets() -> Secrets {
    Secrets {
        aws: format!("AKIA{}", "QWERTYUIOP23ASDF"),
        github: format!("ghp_{}", "Zx9Kq2Lm4Np6Rs8Tv0Wy1Ab3Cd5Ef7Gh9Ij1"),
        private: format!("{}{}", "marmalade", "-zeppelin-quokka"),
        password: format!("{}{}", "Tr0ub4dor", "-and-3"),
        jwt: format!(
            "eyJhbGciOiJIUzI1NiJ9.{}.{}",
            "eyJzdWIiOiJxdW9ra2EifQ", "c2lnbmF0dXJlLXF1b2trYQ"
        ),
    }
}

impl Secrets {
    fn all(&self) -> Vec<&str> {
        vec![
            &self.aws,
            &self.github,
            &self.private,
            &self.password,
            &self.jwt,
        ]
    }
}

/// Every file under `root` (the ledger and the index included) whose bytes contain `needle`,
/// as is or lower-cased (the index keeps lower-cased terms).
pub fn files_containing(root: &Path, needle: &str) -> Vec<String> {
    let lower = needle.to_lowercase();
    walkdir::WalkDir::new(root)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            let bytes = std::fs::read(e.path()).unwrap_or_default();
            [needle.as_bytes(), lower.as_bytes()]
                .iter()
                .any(|n| bytes.windows(n.len()).any(|w| w == *n))
        })
        .map(|e| e.path().display().to_string())
        .collect()
}

fn assert_nowhere(env: &TestEnv, s: &Secrets) {
    // Build the index, so that it is searched as well.
    env.ok(&["reindex"]);
    for secret in s.all() {
        let found = files_containing(&env.dir, secret);
        assert!(found.is_empty(), "{secret} is stored in {found:?}");
        let hits = env.ok(&["search", secret, "--mode", "exact"]);
        assert_eq!(hits["results"], json!([]), "{secret} is found by search");
    }
}

#[test]
fn secrets_and_private_spans_are_redacted_on_ingest_before_they_are_stored() {
    let env = TestEnv::new();
    let s = secrets();
    let text = format!(
        "deploy with key {} and token {}; <private>my {} notes</private>the rest stays; PASSWORD={}",
        s.aws, s.github, s.private, s.password
    );
    let out = env.ok(&["ingest", "--session-id", "s1", "--text", &text]);
    assert_eq!(
        out["redacted"],
        json!({"aws_access_key": 1, "github_token": 1, "private": 1, "password": 1})
    );
    let printed = out.to_string();
    for secret in s.all() {
        assert!(!printed.contains(secret), "the response echoes {secret}");
    }
    let fetched = env.ok(&["fetch", "s1"]);
    assert_eq!(
        fetched["chunks"][0]["content"],
        "deploy with key [REDACTED:aws_access_key] and token [REDACTED:github_token]; the rest stays; PASSWORD=[REDACTED:password]"
    );

    // A batch: content and metadata strings, counted over the batch.
    let lines = [
        json!({"session_id": "s2", "content": format!("bearer {}", s.jwt), "metadata": {"note": format!("password: \"{}\"", s.password)}}),
        json!({"session_id": "s2", "content": format!("<private>{}</private>", s.private)}),
        json!({"session_id": "s2", "content": "nothing secret: commit 4897191e3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a87"}),
    ];
    let jsonl: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let out = env.ok_stdin(&["ingest", "--jsonl", "-"], jsonl.as_bytes());
    assert_eq!(
        out["redacted"],
        json!({"jwt": 1, "password": 1, "private": 1})
    );
    let fetched = env.ok(&["fetch", "s2"]);
    assert_eq!(fetched["chunks"][0]["content"], "bearer [REDACTED:jwt]");
    assert_eq!(
        fetched["chunks"][0]["metadata"]["note"],
        "password: \"[REDACTED:password]\""
    );
    // A chunk that was nothing but private text keeps a marker, not the text.
    assert_eq!(fetched["chunks"][1]["content"], "[REDACTED:private]");
    assert_eq!(
        fetched["chunks"][2]["content"],
        "nothing secret: commit 4897191e3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a87"
    );
    assert_nowhere(&env, &s);
    env.assert_clean();
}

#[test]
fn category_writes_and_log_appends_redact_every_string_value_and_the_reason() {
    let env = TestEnv::new();
    let s = secrets();
    let data = json!({"db": {"url": format!("postgres://app:{}@db.local/app", s.password), "port": 5432},
                      "keys": [s.aws.clone(), "plain"], "notes": format!("<private>{}</private>ok", s.private)});
    let out = env.ok(&[
        "write",
        "infra",
        "--data",
        &data.to_string(),
        "--reason",
        &format!("rotated {}", s.github),
    ]);
    assert_eq!(
        out["redacted"],
        json!({"url_password": 1, "aws_access_key": 1, "private": 1, "github_token": 1})
    );
    assert_eq!(
        env.category_data("infra").unwrap(),
        json!({"db": {"url": "postgres://app:[REDACTED:url_password]@db.local/app", "port": 5432},
               "keys": ["[REDACTED:aws_access_key]", "plain"], "notes": "ok"})
    );
    let out = env.ok(&[
        "write",
        "infra",
        "--merge",
        "--data",
        &json!({"token": s.jwt}).to_string(),
    ]);
    assert_eq!(out["redacted"], json!({"jwt": 1}));
    let out = env.ok(&[
        "append",
        "journal",
        "--data",
        &json!({"event": format!("login with PASSWORD={}", s.password)}).to_string(),
    ]);
    assert_eq!(out["redacted"], json!({"password": 1}));
    // A write with nothing to redact says nothing about it.
    let out = env.ok(&["write", "plain", "--data", "{\"a\": \"b\"}"]);
    assert!(out.get("redacted").is_none(), "{out}");
    let history = env.ok(&["history", "infra"]);
    assert!(!history.to_string().contains(&s.github));
    assert_nowhere(&env, &s);
    env.assert_clean();
}

#[test]
fn the_config_file_adds_patterns_and_exceptions_and_may_switch_redaction_off() {
    let mut env = TestEnv::new();
    let config = env.tmp.path().join("config.toml");
    std::fs::write(
        &config,
        "[redaction]\nallow = [\"EXAMPLE$\"]\n[[redaction.patterns]]\nkind = \"ticket\"\npattern = \"TKT-[0-9]{6}\"\n",
    )
    .unwrap();
    env.set_env("MEMDIR_CONFIG", config.to_str().unwrap());
    let aws = format!("AKIA{}", "QWERTYUIOP23ASDF");
    let example = format!("AKIA{}", "IOSFODNN7EXAMPLE");
    let text = format!("{aws} {example} TKT-123456");
    let out = env.ok(&["ingest", "--session-id", "c", "--text", &text]);
    assert_eq!(out["redacted"], json!({"aws_access_key": 1, "ticket": 1}));
    assert_eq!(
        env.ok(&["fetch", "c"])["chunks"][0]["content"],
        format!("[REDACTED:aws_access_key] {example} [REDACTED:ticket]")
    );
    let shown = env.ok(&["config", "show"]);
    assert_eq!(
        shown["settings"]["redaction.patterns"]["value"],
        json!([{"kind": "ticket", "pattern": "TKT-[0-9]{6}"}])
    );

    std::fs::write(&config, "[redaction]\nenabled = false\n").unwrap();
    let out = env.ok(&["ingest", "--session-id", "off", "--text", &text]);
    assert!(out.get("redacted").is_none());
    assert_eq!(
        env.ok(&["fetch", "off"])["chunks"][0]["content"],
        text.as_str()
    );
}

#[test]
fn a_bad_redaction_section_is_an_error_naming_the_key_and_the_file_and_nothing_is_stored() {
    let mut env = TestEnv::new();
    let config = env.tmp.path().join("config.toml");
    env.set_env("MEMDIR_CONFIG", config.to_str().unwrap());
    for (text, key) in [
        ("[redaction]\nswitch = true\n", "redaction.switch"),
        ("[redaction]\nenabled = \"yes\"\n", "redaction.enabled"),
        (
            "[redaction]\nallow = [\"(unclosed\"]\n",
            "redaction.allow[0]",
        ),
        (
            "[[redaction.patterns]]\nkind = \"Bad Kind\"\npattern = \"x\"\n",
            "redaction.patterns[0].kind",
        ),
        (
            "[[redaction.patterns]]\nkind = \"k\"\npattern = \"[\"\n",
            "redaction.patterns[0].pattern",
        ),
        (
            "[[redaction.patterns]]\nkind = \"k\"\npattern = \"x\"\nextra = 1\n",
            "redaction.patterns[0].extra",
        ),
    ] {
        std::fs::write(&config, text).unwrap();
        let e = env.fail(&["ingest", "--session-id", "s", "--text", "hello"], 3);
        assert_eq!(e["key"], key, "{text}: {e:#}");
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(config.to_str().unwrap()), "{msg}");
    }
    assert!(!env.dir.exists(), "a refused command created the store");
}
