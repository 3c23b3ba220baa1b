//! Access control on the CLI: the `[acl]` section of the config file, evaluated for the
//! configured device. (Every surface and every operation: tests/python/test_acl.py.)

use serde_json::Value;

use crate::util::TestEnv;

const POLICY: &str = r#"
[acl]
admin_devices = ["laptop"]
device_categories = ["laptop", "phone", "web-agent"]

[[acl.rules]]
device = "phone"
read = ["notes_*", "phone", "workflow_*"]
write = ["notes_*"]
ingest = ["mobile"]

[[acl.rules]]
device = "cleaner"
write = ["scratch_*"]
delete = true
"#;

/// A store with a few categories written by the admin, then the policy in force.
fn world() -> TestEnv {
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_DEVICE", "laptop");
    for (name, text) in [
        ("base", "the admin's base facts about aurora"),
        ("notes_trip", "packing list for the aurora trip"),
        ("secret_plans", "aurora launch date is classified"),
        ("scratch_a", "scratch aurora"),
    ] {
        let data = serde_json::json!({ "text": text }).to_string();
        env.ok(&["write", name, "--data", &data]);
    }
    env.ok(&[
        "ingest",
        "--session-id",
        "s1",
        "--project",
        "work",
        "--text",
        "aurora in a session",
    ]);
    let cfg = env.tmp.path().join("acl.toml");
    std::fs::write(&cfg, POLICY).unwrap();
    env.set_env("MEMDIR_CONFIG", cfg.to_str().unwrap());
    env
}

fn as_device(env: &mut TestEnv, device: &str) {
    env.set_env("MEMDIR_DEVICE", device);
}

#[test]
fn a_denied_operation_is_forbidden_names_the_rule_and_changes_no_byte() {
    let mut env = world();
    let before = env.snapshot();
    for (device, args, rule) in [
        (
            "phone",
            vec!["write", "base", "--data", "{\"x\":1}"],
            "acl.admin_devices",
        ),
        (
            "phone",
            vec!["write", "meta", "--data", "{\"x\":1}"],
            "acl.reserved",
        ),
        (
            "phone",
            vec!["write", "secret_plans", "--data", "{}"],
            "acl.rules.write",
        ),
        (
            "phone",
            vec!["append", "journal", "--data", "{\"e\":1}"],
            "acl.rules.write",
        ),
        ("phone", vec!["delete", "notes_trip"], "acl.rules.delete"),
        (
            "phone",
            vec!["restore", "notes_trip", "--version", "1"],
            "acl.rules.delete",
        ),
        ("phone", vec!["compact", "--yes"], "acl.rules.delete"),
        ("phone", vec!["read", "secret_plans"], "acl.rules.read"),
        ("phone", vec!["history", "secret_plans"], "acl.rules.read"),
        ("phone", vec!["diff", "secret_plans"], "acl.rules.read"),
        ("phone", vec!["verify-store"], "acl.rules.read"),
        (
            "phone",
            vec![
                "ingest",
                "--session-id",
                "p",
                "--project",
                "work",
                "--text",
                "x",
            ],
            "acl.rules.ingest",
        ),
        (
            "stranger",
            vec!["write", "stranger", "--data", "{}"],
            "acl.rules.write",
        ),
        (
            "stranger",
            vec!["ingest", "--session-id", "p", "--text", "x"],
            "acl.rules.ingest",
        ),
        (
            "web-agent",
            vec!["write", "mobile_x", "--data", "{}"],
            "acl.rules.write",
        ),
        // Delete rights do not reach a category the device may not write, and compacting
        // everything needs every category.
        ("cleaner", vec!["delete", "base"], "acl.admin_devices"),
        ("cleaner", vec!["compact", "--yes"], "acl.admin_devices"),
    ] {
        as_device(&mut env, device);
        let e = env.fail(&args, 12);
        assert_eq!(e["code"], "forbidden", "{device} {args:?}: {e}");
        assert_eq!(e["rule"], rule, "{device} {args:?}: {e}");
        assert_eq!(e["device"], device, "{device} {args:?}: {e}");
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(device), "{msg}");
        assert!(env.snapshot() == before, "{device} {args:?} changed a file");
    }
}

#[test]
fn what_a_rule_or_registration_grants_is_allowed_and_names_the_device() {
    let mut env = world();
    as_device(&mut env, "phone");
    env.ok(&["write", "notes_new", "--data", "{\"a\":1}"]);
    assert_eq!(
        env.ok(&["read", "notes_new"])["meta"]["updated_by"],
        "phone"
    );
    env.ok(&[
        "ingest",
        "--session-id",
        "m1",
        "--project",
        "mobile",
        "--text",
        "from the phone",
    ]);
    // A registered device writes its own category and workflow_<itself>; an agent its prefix.
    env.ok(&["write", "phone", "--data", "{}"]);
    env.ok(&["write", "workflow_phone", "--data", "{}"]);
    as_device(&mut env, "web-agent");
    env.ok(&["write", "web_notes", "--data", "{}"]);
    env.ok(&[
        "ingest",
        "--session-id",
        "w1",
        "--project",
        "any",
        "--text",
        "agent work",
    ]);
    as_device(&mut env, "cleaner");
    env.ok(&["delete", "scratch_a"]);
    as_device(&mut env, "laptop");
    env.ok(&["write", "base", "--data", "{\"x\":2}"]);
    env.ok(&["compact", "--keep", "3", "--yes"]);
}

#[test]
fn a_category_the_device_may_not_read_is_absent_from_lists_searches_and_context() {
    let mut env = world();
    as_device(&mut env, "phone");
    let list = env.ok(&["list"]);
    let names: Vec<&str> = list["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["notes_trip"], "{list}");
    assert_eq!(list["count"], 1);

    let hits = env.ok(&["search", "aurora", "--limit", "10"]);
    let kinds: Vec<String> = hits["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| match h["kind"].as_str().unwrap() {
            "category" => h["category"].as_str().unwrap().to_string(),
            k => k.to_string(),
        })
        .collect();
    assert!(kinds.contains(&"notes_trip".to_string()), "{hits}");
    assert!(
        kinds.contains(&"chunk".to_string()),
        "sessions stay readable: {hits}"
    );
    for hidden in ["base", "secret_plans", "scratch_a"] {
        assert!(
            !kinds.contains(&hidden.to_string()),
            "{hidden} leaked: {hits}"
        );
    }
    // The hidden ones take no place among the hits: a limit of 1 still finds a visible one.
    let one = env.ok(&["search", "aurora", "--kind", "category", "--limit", "1"]);
    assert_eq!(one["results"][0]["category"], "notes_trip", "{one}");
    // Filtering by a hidden category finds nothing, without an error that confirms it.
    let none = env.ok(&["search", "classified", "--category", "secret_plans"]);
    assert_eq!(none["count"], 0, "{none}");
    let exact = env.ok(&["search", "\"launch date is classified\"", "--mode", "exact"]);
    assert_eq!(exact["count"], 0, "{exact}");

    let ctx = env.ok(&["context", "notes_trip", "secret_plans", "nothing_here"]);
    assert!(ctx["categories"].get("notes_trip").is_some(), "{ctx}");
    assert!(ctx["categories"].get("secret_plans").is_none(), "{ctx}");
    let missing: Vec<&str> = ctx["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(missing, ["nothing_here", "secret_plans"], "{ctx}");
    // A hidden category takes no part of a token budget and is never named as left out.
    let ctx = env.ok(&[
        "context",
        "secret_plans",
        "notes_trip",
        "--max-tokens",
        "60",
    ]);
    assert!(!ctx.to_string().contains("launch"), "{ctx}");
    assert!(ctx["categories"].get("notes_trip").is_some(), "{ctx}");
    assert!(
        !ctx["omitted"]["categories"]
            .to_string()
            .contains("secret_plans"),
        "{ctx}"
    );

    // Status counts what the device may read, no more.
    let status = env.ok(&["status"]);
    assert_eq!(
        (&status["categories"], &status["logs"]),
        (&1.into(), &0.into()),
        "{status}"
    );

    // The admin sees everything.
    as_device(&mut env, "laptop");
    assert_eq!(env.ok(&["list"])["count"], 4);
    assert_eq!(env.ok(&["status"])["categories"], 4);
}

#[test]
fn status_says_whether_access_control_is_on_and_what_the_device_is() {
    let mut env = world();
    let s = env.ok(&["status"]);
    assert_eq!(s["access"]["enabled"], true, "{s}");
    assert_eq!(s["access"]["role"], "admin");
    as_device(&mut env, "phone");
    assert_eq!(env.ok(&["status"])["access"]["role"], "registered");
    as_device(&mut env, "stranger");
    let s = env.ok(&["status"]);
    assert_eq!(s["access"]["role"], "unregistered");
    assert_eq!(s["actor"], "stranger");

    let open = TestEnv::new();
    open.ok(&["init"]);
    let s: Value = open.ok(&["status"]);
    assert_eq!(s["access"]["enabled"], false, "{s}");
    assert_eq!(s["access"]["role"], "open");
    assert!(
        s["access"]["summary"]
            .as_str()
            .unwrap()
            .contains("every device may do everything")
    );
}
