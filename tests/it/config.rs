//! The configuration file, its precedence (flag, environment, file, default), its errors,
//! `MEMDIR_REQUIRE_CONFIG`, `config show` and `config init`, the line `serve` writes about the
//! memory directory, and client registrations that pin the directory as an argument.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::TestEnv;

/// The config file's default location in a test world (`$HOME/.config/memdir/config.toml`).
fn config_path(env: &TestEnv) -> PathBuf {
    env.tmp.path().join("home/.config/memdir/config.toml")
}

fn write_config(env: &TestEnv, text: &str) -> PathBuf {
    let p = config_path(env);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

fn unset(env: &mut TestEnv, key: &str) {
    env.envs.retain(|(k, _)| k != key);
}

/// Every file below `root` with its bytes, `.memdir/` included.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(root).unwrap().display().to_string();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// Who wrote the current version of `category`.
fn writer_of(env: &TestEnv, dir_flag: Option<&Path>, category: &str) -> String {
    let mut args: Vec<String> = Vec::new();
    if let Some(d) = dir_flag {
        args.extend(["--dir".into(), d.display().to_string()]);
    }
    args.extend(["read".into(), category.into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    env.ok(&args)["meta"]["updated_by"]
        .as_str()
        .unwrap()
        .to_string()
}

fn show(env: &TestEnv, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["config", "show"]);
    env.ok(&all)["settings"].clone()
}

#[test]
fn dir_and_device_come_from_the_flag_then_the_environment_then_the_file_then_the_default() {
    let mut env = TestEnv::new();
    let root = env.tmp.path().to_path_buf();
    let (flag_dir, env_dir, file_dir) = (root.join("flag"), root.join("env"), root.join("file"));
    let file = write_config(
        &env,
        &format!(
            "dir = {:?}\ndevice = \"file-device\"\n",
            file_dir.display().to_string()
        ),
    );
    env.set_env("MEMDIR_DIR", env_dir.to_str().unwrap());
    env.set_env("MEMDIR_DEVICE", "env-device");

    // The flags win over everything.
    let flags = [
        "--dir",
        flag_dir.to_str().unwrap(),
        "--device",
        "flag-device",
    ];
    let mut args = flags.to_vec();
    args.extend(["write", "a", "--data", "{}"]);
    env.ok(&args);
    assert!(flag_dir.join("categories/a.json").is_file());
    assert_eq!(writer_of(&env, Some(&flag_dir), "a"), "flag-device");
    let s = show(&env, &flags);
    assert_eq!(s["dir"]["source"], "flag --dir");
    assert_eq!(s["device"]["source"], "flag --device");

    // Then the environment.
    env.ok(&["write", "b", "--data", "{}"]);
    assert!(env_dir.join("categories/b.json").is_file());
    assert_eq!(writer_of(&env, None, "b"), "env-device");
    let s = show(&env, &[]);
    assert_eq!(s["dir"]["source"], "environment MEMDIR_DIR");
    assert_eq!(s["device"]["source"], "environment MEMDIR_DEVICE");

    // Then the file.
    unset(&mut env, "MEMDIR_DIR");
    unset(&mut env, "MEMDIR_DEVICE");
    env.ok(&["write", "c", "--data", "{}"]);
    assert!(file_dir.join("categories/c.json").is_file());
    assert_eq!(writer_of(&env, None, "c"), "file-device");
    let s = show(&env, &[]);
    let from_file = format!("file {}", file.display());
    assert_eq!(s["dir"]["source"], from_file.as_str());
    assert_eq!(s["device"]["source"], from_file.as_str());

    // Then the defaults: ~/.local/share/memdir and the host name.
    std::fs::remove_file(&file).unwrap();
    env.ok(&["write", "d", "--data", "{}"]);
    let default_dir = root.join("home/.local/share/memdir");
    assert!(default_dir.join("categories/d.json").is_file());
    let s = show(&env, &[]);
    assert_eq!(s["dir"]["source"], "default");
    assert_eq!(
        s["dir"]["value"],
        default_dir.display().to_string().as_str()
    );
    assert_eq!(s["device"]["source"], "default");
    let host = s["device"]["value"].as_str().unwrap().to_string();
    assert!(!host.is_empty());
    assert_eq!(writer_of(&env, None, "d"), host);
}

#[test]
fn a_dir_in_the_file_may_start_at_the_home_directory_but_not_be_relative() {
    let mut env = TestEnv::new();
    unset(&mut env, "MEMDIR_DIR");
    write_config(&env, "dir = \"~/notes/memory\"\n");
    let s = show(&env, &[]);
    let expected = env.tmp.path().join("home/notes/memory");
    assert_eq!(s["dir"]["value"], expected.display().to_string().as_str());

    let path = write_config(&env, "dir = \"notes\"\n");
    let e = env.fail(&["status"], 3);
    assert_eq!(e["key"], "dir");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("not an absolute path"), "{msg}");
    assert!(msg.contains(path.to_str().unwrap()), "{msg}");
}

#[test]
fn a_key_memdir_does_not_know_is_an_error_naming_the_key_the_file_and_the_line() {
    let env = TestEnv::new();
    for (text, key, line) in [
        ("device = \"x\"\ncolour = \"blue\"\n", "colour", 2),
        (
            "[http]\nhost = \"127.0.0.1\"\nprot = 8787\n",
            "http.prot",
            3,
        ),
        ("[search]\nanalyser = \"english\"\n", "search.analyser", 2),
        ("[serch]\nanalyzer = \"english\"\n", "serch", 1),
    ] {
        let path = write_config(&env, text);
        let e = env.fail(&["status"], 3);
        assert_eq!(e["code"], "invalid", "{text}");
        assert_eq!(e["key"], key, "{text}: {e}");
        assert_eq!(e["field"], key, "{text}: {e}");
        assert_eq!(e["file"], path.to_str().unwrap(), "{text}: {e}");
        assert_eq!(e["line"], line, "{text}: {e}");
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(&format!("`{key}`")), "{msg}");
        assert!(msg.contains(path.to_str().unwrap()), "{msg}");
        assert!(msg.contains("unknown field"), "{msg}");
    }
    assert!(
        !env.dir.exists(),
        "a refused configuration creates no store"
    );
}

#[test]
fn a_value_of_the_wrong_type_or_out_of_range_is_an_error_naming_the_key_and_the_file() {
    let env = TestEnv::new();
    for (text, key, says) in [
        (
            "lock_timeout_ms = \"ten\"\n",
            "lock_timeout_ms",
            "invalid type",
        ),
        ("device = 7\n", "device", "invalid type"),
        ("[http]\nport = 70000\n", "http.port", "u16"),
        (
            "[http]\nmax_sessions = 0\n",
            "http.max_sessions",
            "out of range",
        ),
        (
            "[logs]\nmax_entries = 0\n",
            "logs.max_entries",
            "out of range",
        ),
        (
            "[search]\nanalyzer = \"klingon\"\n",
            "search.analyzer",
            "klingon",
        ),
        ("[mcp]\ntools = \"most\"\n", "mcp.tools", "most"),
        ("device = \"\"\n", "device", "empty"),
        ("search = 1\n", "search", "invalid type"),
    ] {
        let path = write_config(&env, text);
        let e = env.fail(&["list"], 3);
        assert_eq!(e["key"], key, "{text}: {e}");
        assert_eq!(e["file"], path.to_str().unwrap(), "{text}: {e}");
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(&format!("`{key}`")), "{msg}");
        assert!(msg.contains(path.to_str().unwrap()), "{msg}");
        assert!(msg.contains(says), "{text}: {msg}");
    }
    // A file that is not TOML at all names the file and the place.
    let path = write_config(&env, "device = laptop\n");
    let e = env.fail(&["list"], 3);
    assert_eq!(e["file"], path.to_str().unwrap());
    assert_eq!(e["line"], 1);
    assert!(!env.dir.exists());
}

#[test]
fn access_control_errors_name_the_key_and_change_nothing() {
    let env = TestEnv::new();
    for (text, key, says) in [
        (
            "[acl]\nadmin_devices = [\"laptop\"]\nadmins = [\"x\"]\n",
            "acl.admins",
            "unknown field",
        ),
        (
            "[[acl.rules]]\ndevice = \"phone\"\nwrite = [\"notes_*\", \"../etc\"]\n",
            "acl.rules[0].write[1]",
            "name characters",
        ),
        (
            "[[acl.rules]]\ndevice = \"phone\"\ndelete = \"yes\"\n",
            "acl.rules[0].delete",
            "invalid type",
        ),
        ("[[acl.rules]]\nwrite = [\"a\"]\n", "acl.rules[0]", "device"),
        (
            "[[http.tokens]]\ndevice = \"phone\"\ntoken = \"hunter2hunter2hunter2\"\n",
            "http.tokens[0].token",
            "unknown field",
        ),
        (
            "[[http.tokens]]\ndevice = \"phone\"\n",
            "http.tokens[0]",
            "exactly one of token_env and token_file",
        ),
        (
            "[[http.tokens]]\ndevice = \"phone\"\ntoken_env = \"1X\"\n",
            "http.tokens[0].token_env",
            "not an environment variable name",
        ),
    ] {
        let path = write_config(&env, text);
        let e = env.fail(&["write", "base", "--data", "{}"], 3);
        assert_eq!(e["key"], key, "{text}: {e}");
        assert_eq!(e["file"], path.to_str().unwrap(), "{text}: {e}");
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(says), "{text}: {msg}");
    }
    assert!(!env.dir.exists());
}

#[test]
fn a_bad_environment_variable_is_an_error_naming_it() {
    let env = TestEnv::new();
    for (var, value) in [
        ("MEMDIR_LOCK_TIMEOUT_MS", "soon"),
        ("MEMDIR_SCAN_INTERVAL_MS", "-1"),
        ("MEMDIR_ANALYZER", "klingon"),
        ("MEMDIR_TOOLS", "most"),
        ("MEMDIR_HTTP_MAX_SESSIONS", "0"),
        ("MEMDIR_REQUIRE_CONFIG", "maybe"),
    ] {
        let r = env.run_env(&["status"], &[(var, value)], b"").run;
        assert_eq!(r.code, 3, "{var}={value}: {}", r.stderr);
        let e = r.error();
        assert_eq!(e["field"], var, "{e}");
        assert!(e["message"].as_str().unwrap().contains(var), "{e}");
    }
}

#[test]
fn memdir_config_naming_a_missing_file_is_an_error() {
    let mut env = TestEnv::new();
    let missing = env.tmp.path().join("nowhere/config.toml");
    env.set_env("MEMDIR_CONFIG", missing.to_str().unwrap());
    let e = env.fail(&["status"], 3);
    assert_eq!(e["file"], missing.to_str().unwrap());
    assert!(e["message"].as_str().unwrap().contains("MEMDIR_CONFIG"));
    // Pointing it at a file works.
    let file = env.tmp.path().join("elsewhere.toml");
    std::fs::write(&file, "device = \"elsewhere\"\n").unwrap();
    env.set_env("MEMDIR_CONFIG", file.to_str().unwrap());
    unset(&mut env, "MEMDIR_DEVICE");
    let s = show(&env, &[]);
    assert_eq!(s["device"]["value"], "elsewhere");
    assert_eq!(
        s["device"]["source"],
        format!("file {}", file.display()).as_str()
    );
}

/// Every command a user can run, for the fail-closed test.
const EVERY_COMMAND: &[&[&str]] = &[
    &["init"],
    &["status"],
    &["ingest", "--session-id", "s", "--text", "hello"],
    &["fetch", "s"],
    &["overview"],
    &["read", "base"],
    &["write", "base", "--data", "{\"x\": 2}"],
    &["append", "journal", "--data", "{\"e\": 1}"],
    &["list"],
    &["delete", "base"],
    &["history", "base"],
    &["diff", "base"],
    &["restore", "base", "--version", "1"],
    &["compact", "--keep", "1", "--yes"],
    &["context", "base"],
    &["delta", "base", "--since-hash", "absent"],
    &["verify-store"],
    &["search", "hello"],
    &["openapi"],
    &["ops"],
    &["reindex"],
    &["serve"],
    &["serve", "--transport", "http", "--port", "0"],
    &["config", "show"],
    &["config", "init"],
    &["config", "init", "--force"],
    &["config", "--client", "claude"],
];

#[test]
fn require_config_fails_every_command_and_changes_nothing_without_a_valid_file() {
    let mut env = TestEnv::new();
    env.ok(&["write", "base", "--data", "{\"x\": 1}"]);
    env.ok(&["ingest", "--session-id", "s", "--text", "hello"]);
    env.ok(&["search", "hello"]);
    let before = tree(&env.dir);
    let config = config_path(&env);
    env.set_env("MEMDIR_REQUIRE_CONFIG", "1");

    // Missing: every command refuses, and no config file appears either.
    for args in EVERY_COMMAND {
        let r = env.run(args);
        assert_eq!(r.code, 3, "{}: {}", r.cmd, r.stderr);
        let e = r.error();
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("MEMDIR_REQUIRE_CONFIG"),
            "{}: {e}",
            r.cmd
        );
        assert!(r.stdout.is_empty(), "{}: {}", r.cmd, r.stdout);
        assert!(!config.exists(), "{} created the config file", r.cmd);
    }
    assert_eq!(
        tree(&env.dir),
        before,
        "a refused command changed the store"
    );

    // Invalid: the same, and the file stays as it was.
    write_config(&env, "device = \"x\"\nunknown_key = 1\n");
    let text = std::fs::read(&config).unwrap();
    for args in EVERY_COMMAND {
        let r = env.run(args);
        assert_eq!(r.code, 3, "{}: {}", r.cmd, r.stderr);
        assert_eq!(r.error()["key"], "unknown_key", "{}", r.cmd);
        assert_eq!(
            std::fs::read(&config).unwrap(),
            text,
            "{} changed it",
            r.cmd
        );
    }
    assert_eq!(
        tree(&env.dir),
        before,
        "a refused command changed the store"
    );

    // A valid file: commands run again.
    write_config(&env, "device = \"managed\"\n");
    env.ok(&["status"]);
}

#[test]
fn config_show_names_the_source_of_every_value() {
    let mut env = TestEnv::new();
    let file = write_config(
        &env,
        "lock_timeout_ms = 2500\n[search]\nanalyzer = \"german\"\n[http]\nport = 9999\n",
    );
    env.set_env("MEMDIR_SCAN_INTERVAL_MS", "250");
    let out = env.ok(&["--dir", "/tmp/flag-dir", "config", "show"]);
    assert_eq!(out["file"]["path"], file.to_str().unwrap());
    assert_eq!(out["file"]["found"], true);
    assert_eq!(out["file"]["required"], false);
    assert_eq!(out["file"]["source"], "default");
    let s = &out["settings"];
    let from_file = format!("file {}", file.display());
    let expect = |key: &str, value: Value, source: &str| {
        assert_eq!(s[key]["value"], value, "{key}: {s:#}");
        assert_eq!(s[key]["source"], source, "{key}: {s:#}");
    };
    expect("dir", "/tmp/flag-dir".into(), "flag --dir");
    expect("device", "test-device".into(), "environment MEMDIR_DEVICE");
    expect("lock_timeout_ms", 2500.into(), &from_file);
    expect(
        "scan_interval_ms",
        250.into(),
        "environment MEMDIR_SCAN_INTERVAL_MS",
    );
    expect("search.analyzer", "german".into(), &from_file);
    expect("http.port", 9999.into(), &from_file);
    expect("logs.max_entries", 200.into(), "default");
    expect("mcp.tools", "default".into(), "default");
    expect("http.host", "127.0.0.1".into(), "default");
    // Every entry has a value and a source.
    for (k, v) in s.as_object().unwrap() {
        assert!(v.get("value").is_some(), "{k}");
        assert!(v["source"].is_string(), "{k}");
    }
}

#[test]
fn config_init_writes_a_file_config_show_reads_and_will_not_overwrite_it() {
    let env = TestEnv::new();
    let path = config_path(&env);
    let out = env.ok(&["config", "init"]);
    assert_eq!(out["path"], path.to_str().unwrap());
    assert_eq!(out["replaced"], false);
    let example =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/config.toml"))
            .unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), example);
    let shown = env.ok(&["config", "show"]);
    assert_eq!(shown["file"]["found"], true);

    // The user edits it (a top-level key goes before the first section); config show reads
    // the edit.
    std::fs::write(&path, format!("scan_interval_ms = 5000\n{example}")).unwrap();
    let edited = std::fs::read(&path).unwrap();
    let s = show(&env, &[]);
    assert_eq!(s["scan_interval_ms"]["value"], 5000);

    // A second init refuses and leaves the file alone; --force replaces it.
    let e = env.fail(&["config", "init"], 5);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains(path.to_str().unwrap())
    );
    assert!(e["hints"].to_string().contains("--force"));
    assert_eq!(std::fs::read(&path).unwrap(), edited);
    let out = env.ok(&["config", "init", "--force"]);
    assert_eq!(out["replaced"], true);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), example);
    assert!(!env.dir.exists(), "config init touches no store");
}

#[test]
fn config_init_replaces_a_broken_file_with_force() {
    let env = TestEnv::new();
    let path = write_config(&env, "not toml at all [\n");
    env.fail(&["status"], 3);
    env.ok(&["config", "init", "--force"]);
    env.ok(&["config", "show"]);
    assert!(std::fs::read_to_string(&path).unwrap().contains("[http]"));
}

/// The example file parses as it is (every key commented out, so everything is the default),
/// and with every key uncommented its values are the defaults it documents.
#[test]
fn the_example_config_parses_and_documents_the_defaults() {
    let mut env = TestEnv::new();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/config.toml");
    let defaults = show(&env, &[]);
    env.set_env("MEMDIR_CONFIG", example.to_str().unwrap());
    let as_is = show(&env, &[]);
    assert_eq!(as_is, defaults);

    let text = std::fs::read_to_string(&example).unwrap();
    let uncommented: String = text
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest)
                if rest.split_once(" = ").is_some_and(|(k, _)| {
                    k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                }) =>
            {
                rest.to_string()
            }
            // The access-control tables are examples, not defaults: uncommented too.
            Some(rest) if rest.starts_with('[') => rest.to_string(),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let all = env.tmp.path().join("all.toml");
    std::fs::write(&all, &uncommented).unwrap();
    env.set_env("MEMDIR_CONFIG", all.to_str().unwrap());
    unset(&mut env, "MEMDIR_DIR");
    unset(&mut env, "MEMDIR_DEVICE");
    let s = show(&env, &[]);
    let from_file = format!("file {}", all.display());
    for (k, v) in s.as_object().unwrap() {
        assert_eq!(
            v["source"],
            from_file.as_str(),
            "{k} is not documented in the example"
        );
        if !matches!(k.as_str(), "dir" | "device" | "http.port") {
            assert_eq!(
                v["value"], defaults[k]["value"],
                "{k}: the example is not the default"
            );
        }
    }
    assert_eq!(s["device"]["value"], "laptop");
    let full = env.ok(&["config", "show"]);
    assert_eq!(full["acl"]["enabled"], true, "{full}");
    assert_eq!(full["acl"]["this_device"]["role"], "admin");
    assert_eq!(full["acl"]["rules"][0]["write"][1], "workflow_{device}");
    assert_eq!(full["http_tokens"][0]["token_env"], "MEMDIR_TOKEN_PHONE");
    assert_eq!(
        s["dir"]["value"],
        env.tmp
            .path()
            .join("home/.local/share/memdir")
            .display()
            .to_string()
            .as_str()
    );
}

/// Reads stderr lines of a server until one matches `done`, within a deadline.
fn stderr_until(child: &mut std::process::Child, done: &str) -> Vec<String> {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut lines = Vec::new();
    while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        let stop = line.contains(done);
        lines.push(line);
        if stop {
            return lines;
        }
    }
    panic!("no line containing {done:?} on stderr: {lines:?}");
}

#[test]
fn serve_names_the_memory_directory_and_its_source_on_stderr() {
    let mut env = TestEnv::new();
    let dir = env.dir.display().to_string();
    // stdio: the line comes first; the server ends with its input.
    let r = env.run(&["serve"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stderr.lines().next(),
        Some(format!("memdir: memory directory {dir} (set by MEMDIR_DIR)").as_str())
    );
    let flag_dir = env.tmp.path().join("flagged");
    let r = env.run(&["--dir", flag_dir.to_str().unwrap(), "serve"]);
    assert_eq!(
        r.stderr.lines().next(),
        Some(
            format!(
                "memdir: memory directory {} (set by --dir)",
                flag_dir.display()
            )
            .as_str()
        )
    );
    unset(&mut env, "MEMDIR_DIR");
    let file = write_config(&env, &format!("dir = {dir:?}\n"));
    let r = env.run(&["serve"]);
    assert_eq!(
        r.stderr.lines().next(),
        Some(format!("memdir: memory directory {dir} (set in {})", file.display()).as_str())
    );
    std::fs::remove_file(&file).unwrap();
    let r = env.run(&["serve"]);
    let default_dir = env.tmp.path().join("home/.local/share/memdir");
    assert_eq!(
        r.stderr.lines().next(),
        Some(
            format!(
                "memdir: memory directory {} (the default)",
                default_dir.display()
            )
            .as_str()
        )
    );

    // HTTP: the line comes just before the listening line.
    env.set_env("MEMDIR_DIR", &dir);
    for transport in ["http", "mcp-http"] {
        let mut child = env.spawn(&["serve", "--transport", transport, "--port", "0"]);
        let lines = stderr_until(&mut child, "listening on");
        child.kill().unwrap();
        child.wait().unwrap();
        let n = lines.len();
        assert!(n >= 2, "{lines:?}");
        assert_eq!(
            lines[n - 2],
            format!("memdir: memory directory {dir} (set by MEMDIR_DIR)"),
            "{transport}"
        );
    }
}

#[test]
fn status_reports_where_the_memory_directory_came_from() {
    let env = TestEnv::new();
    // Before the store exists, and after.
    let s = env.ok(&["status"]);
    assert_eq!(s["exists"], false);
    assert_eq!(s["dir_source"], "environment MEMDIR_DIR");
    env.ok(&["init"]);
    let s = env.ok(&["status"]);
    assert_eq!(s["dir"], env.dir.display().to_string().as_str());
    assert_eq!(s["dir_source"], "environment MEMDIR_DIR");
    let other = env.tmp.path().join("other");
    let s = env.ok(&["--dir", other.to_str().unwrap(), "status"]);
    assert_eq!(s["dir_source"], "flag --dir");
}

/// A fake client on `PATH` that records the arguments it was run with.
fn fake_client(env: &mut TestEnv, name: &str) -> PathBuf {
    let bin = env.tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let record = env.tmp.path().join(format!("{name}.args"));
    let script = bin.join(name);
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" > '{}'\n",
            record.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = env
        .envs
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    env.set_env("PATH", &format!("{}:{path}", bin.display()));
    record
}

/// Splits a line printed by `--dry-run` as a POSIX shell would (plain words and single quotes,
/// which is all the printer uses).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.trim_end().chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    cur.push(q);
                }
            }
            '\\' => {
                in_word = true;
                cur.extend(chars.next());
            }
            ' ' if in_word => {
                words.push(std::mem::take(&mut cur));
                in_word = false;
            }
            ' ' => {}
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

#[test]
fn config_client_with_dir_puts_the_directory_in_the_server_command_and_dry_run_prints_what_setup_runs()
 {
    let mut env = TestEnv::new();
    let store = env.tmp.path().join("my store");
    let store_s = store.to_str().unwrap();
    for client in ["claude", "codex"] {
        let record = fake_client(&mut env, client);
        let dry = env.run(&[
            "config",
            "--client",
            client,
            "--dir",
            store_s,
            "--setup",
            "--dry-run",
        ]);
        assert_eq!(dry.code, 0, "{}", dry.stderr);
        assert_eq!(dry.stdout.lines().count(), 1, "{}", dry.stdout);
        let words = shell_words(&dry.stdout);
        assert_eq!(words[0], client);
        let tail: Vec<&str> = words[words.len() - 4..]
            .iter()
            .map(String::as_str)
            .collect();
        assert_eq!(
            tail,
            ["memdir", "--dir", store_s, "serve"],
            "{}",
            dry.stdout
        );
        assert!(!dry.stdout.contains("MEMDIR_DIR"), "{}", dry.stdout);

        // --setup runs exactly that command.
        let run = env.run(&["config", "--client", client, "--dir", store_s, "--setup"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let ran: Vec<String> = std::fs::read_to_string(&record)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        assert!(ran[0].ends_with(&format!("/{client}")), "{ran:?}");
        assert_eq!(ran[1..], words[1..], "{client}: dry run and setup differ");
    }
    // Snippets for clients without a command carry the directory as an argument too.
    for client in ["cursor", "generic", "opencode", "codex"] {
        let out = env.run(&["config", "--client", client, "--dir", store_s]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.stdout.contains("\"--dir\""), "{client}: {}", out.stdout);
        assert!(out.stdout.contains(store_s), "{client}: {}", out.stdout);
        assert!(
            !out.stdout.contains("MEMDIR_DIR"),
            "{client}: {}",
            out.stdout
        );
    }
    // A relative --dir is registered as the absolute path it means here.
    let dry = env.run(&[
        "config",
        "--client",
        "claude",
        "--dir",
        "rel",
        "--setup",
        "--dry-run",
    ]);
    let words = shell_words(&dry.stdout);
    let expected = env.tmp.path().join("rel");
    assert_eq!(words[words.len() - 2], expected.to_str().unwrap());
}

/// A fake `claude` on `PATH` that behaves as Claude Code does: `mcp add` registers a server
/// once and refuses a name it has with "already exists" and exit 1; a name starting with
/// `broken` fails otherwise.
fn fake_claude(env: &mut TestEnv) -> PathBuf {
    let bin = env.tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let registry = env.tmp.path().join("claude-registry");
    let script = bin.join("claude");
    std::fs::write(
        &script,
        format!(
            r#"#!/bin/sh
reg='{reg}'
if [ "$1 $2" != "mcp add" ]; then exit 64; fi
if [ -e "$reg" ]; then
  echo "MCP server memdir already exists in user config" >&2
  exit 1
fi
if [ -e "$reg.broken" ]; then
  echo "Error: could not write ~/.claude.json: permission denied" >&2
  exit 3
fi
printf '%s\n' "$@" > "$reg"
echo "Added stdio MCP server memdir to user config"
"#,
            reg = registry.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = env
        .envs
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    env.set_env("PATH", &format!("{}:{path}", bin.display()));
    registry
}

/// Issue 29, item 10: a second `--setup` passed Claude Code's "already exists" and its exit 1
/// through, and exit 1 is memdir's "verify-store found problems".
#[test]
fn setup_twice_says_memdir_is_registered_already_and_succeeds() {
    let mut env = TestEnv::new();
    let registry = fake_claude(&mut env);
    let first = env.run(&["config", "--client", "claude", "--setup"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let v = first.json();
    assert_eq!(v["changed"], true, "{v}");
    assert!(
        first.stderr.contains("Added stdio MCP server"),
        "{}",
        first.stderr
    );
    let registered = std::fs::read_to_string(&registry).unwrap();

    let again = env.run(&["config", "--client", "claude", "--setup"]);
    assert_eq!(
        again.code, 0,
        "a second setup is no error: {}",
        again.stderr
    );
    let v = again.json();
    assert_eq!(v["changed"], false, "{v}");
    assert_eq!(v["already_registered"], true, "{v}");
    let note = v["note"].as_str().unwrap();
    assert!(
        note.contains("already has an MCP server named memdir"),
        "{note}"
    );
    assert!(
        note.contains("claude mcp remove --scope user memdir"),
        "{note}"
    );
    assert_eq!(std::fs::read_to_string(&registry).unwrap(), registered);

    // Any other failure of the client is memdir's `unavailable` (exit 8) with the client's
    // words and the command to run by hand, never the client's own exit code.
    std::fs::remove_file(&registry).unwrap();
    std::fs::write(format!("{}.broken", registry.display()), "").unwrap();
    let e = env.fail(&["config", "--client", "claude", "--setup"], 8);
    assert_eq!(e["code"], "unavailable", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("exit 3") && message.contains("permission denied"),
        "{message}"
    );
    assert!(
        e["hints"][0].as_str().unwrap().contains("claude mcp add"),
        "{e}"
    );
}

/// Issue 29, item 10: `--dry-run` without `--setup` or `--hooks` was ignored without a word.
#[test]
fn dry_run_without_setup_or_hooks_is_a_usage_error() {
    let env = TestEnv::new();
    for client in ["claude", "cursor"] {
        let r = env.run(&["config", "--client", client, "--dry-run"]);
        assert_eq!(r.code, 2, "{client}: {} {}", r.stdout, r.stderr);
        assert!(r.stdout.is_empty(), "{client}: {}", r.stdout);
        assert!(
            r.stderr.contains("--setup") && r.stderr.contains("--hooks"),
            "{client}: {}",
            r.stderr
        );
    }
    // With one of them it still means what it says.
    let r = env.run(&["config", "--client", "claude", "--setup", "--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// Issue 29, item 10: VS Code, Claude Desktop, Gemini CLI, Windsurf and Zed had no snippet, and
/// snippets for desktop apps named a bare `memdir` those apps may not find on their PATH.
#[test]
fn every_client_gets_a_snippet_in_its_own_format_and_desktop_apps_the_full_path() {
    let env = TestEnv::new();
    let exe = crate::util::bin();
    let exe = std::fs::canonicalize(&exe).unwrap();
    let exe = exe.to_str().unwrap();
    let store = env.tmp.path().join("my store");
    let store_s = store.to_str().unwrap();
    // (client, the path to the server entry, whether it is a desktop app)
    let cases: &[(&str, &[&str], bool)] = &[
        ("vscode", &["servers", "memdir"], true),
        ("claude-desktop", &["mcpServers", "memdir"], true),
        ("windsurf", &["mcpServers", "memdir"], true),
        ("zed", &["context_servers", "memdir"], true),
        ("cursor", &["mcpServers", "memdir"], true),
        ("generic", &["mcpServers", "memdir"], true),
        ("gemini", &["mcpServers", "memdir"], false),
    ];
    for (client, at, desktop) in cases {
        let r = env.run(&["config", "--client", client, "--dir", store_s]);
        assert_eq!(r.code, 0, "{client}: {}", r.stderr);
        let v = r.json();
        let entry = at.iter().fold(&v, |v, k| &v[k]);
        let command = entry["command"]
            .as_str()
            .unwrap_or_else(|| panic!("{client}: {v}"));
        let want = if *desktop { exe } else { "memdir" };
        assert_eq!(command, want, "{client}: {v}");
        assert_eq!(
            entry["args"],
            serde_json::json!(["--dir", store_s, "serve"]),
            "{client}"
        );
        assert!(r.stderr.contains("add this to"), "{client}: {}", r.stderr);
        assert_eq!(
            r.stderr.contains("full path"),
            *desktop,
            "{client} says whether it names the full path: {}",
            r.stderr
        );
        // --command names another binary, and nothing needs saying.
        let r = env.run(&["config", "--client", client, "--command", "/opt/memdir"]);
        let v = r.json();
        assert_eq!(
            at.iter().fold(&v, |v, k| &v[k])["command"],
            "/opt/memdir",
            "{client}"
        );
        assert!(!r.stderr.contains("full path"), "{client}: {}", r.stderr);
    }
    let v = env.ok(&["config", "--client", "vscode"]);
    assert_eq!(v["servers"]["memdir"]["type"], "stdio", "{v}");
    let v = env.ok(&["config", "--client", "zed"]);
    assert_eq!(
        v["context_servers"]["memdir"]["env"],
        serde_json::json!({}),
        "{v}"
    );
    // The terminal agents keep the bare name their shell finds.
    let r = env.run(&["config", "--client", "claude", "--setup", "--dry-run"]);
    assert!(
        shell_words(&r.stdout).contains(&"memdir".to_string()),
        "{}",
        r.stdout
    );
}

/// Issue 29, item 10: a port in use stopped `serve` without a word on what to do.
#[test]
fn a_port_in_use_names_port_0_and_another_port() {
    let env = TestEnv::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    for transport in ["http", "mcp-http"] {
        let e = env.fail(&["serve", "--transport", transport, "--port", &port], 8);
        assert_eq!(e["code"], "unavailable", "{e}");
        assert!(e["message"].as_str().unwrap().contains(&port), "{e}");
        let hint = e["hints"][0]
            .as_str()
            .unwrap_or_else(|| panic!("no hint: {e}"));
        assert!(
            hint.contains("--port 0") && hint.contains("another"),
            "{hint}"
        );
    }
    drop(taken);
}

/// The files in `examples/` are what `config --client` prints (naming a bare `memdir`).
#[test]
fn the_example_registrations_are_what_config_client_prints() {
    let env = TestEnv::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    for (client, file) in [
        ("claude", "claude.sh"),
        ("claude-desktop", "claude-desktop-config.json"),
        ("codex", "codex.toml"),
        ("cursor", "cursor-mcp.json"),
        ("gemini", "gemini-settings.json"),
        ("generic", "generic-mcp.json"),
        ("opencode", "opencode.json"),
        ("vscode", "vscode-mcp.json"),
        ("windsurf", "windsurf-mcp-config.json"),
        ("zed", "zed-settings.json"),
    ] {
        let r = env.run(&["config", "--client", client, "--command", "memdir"]);
        assert_eq!(r.code, 0, "{client}: {}", r.stderr);
        let want = std::fs::read_to_string(examples.join(file)).unwrap();
        assert_eq!(
            r.stdout, want,
            "examples/{file} differs from `config --client {client}`"
        );
    }
}
