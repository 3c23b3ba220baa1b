//! `memdir hook claude-code`: capture as a transcript grows equals a full import, a killed or
//! cut-short capture resumes without loss or duplicates, bad events change nothing and leave
//! a log line (exit 0 always), and `config --client claude --hooks` merges into settings.json.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::util::TestEnv;

const CC_SESSION: &str = "5b2f0c7e-3d1a-4e8b-9f60-2c4d8a1e7b93";

fn fixture() -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/importers/claude-code-session.jsonl");
    std::fs::read(p).unwrap()
}

/// The fixture's unterminated tail, completed (as the importer design note gives it).
const TAIL_END: &[u8] = b" test for the clock injection.\"},\"uuid\":\"0f1a2b3c-000e-4a00-8000-00000000000e\",\"timestamp\":\"2026-03-02T09:41:10.000Z\"}\n";

/// The whole transcript: the fixture with its last line completed.
fn full_transcript() -> Vec<u8> {
    let mut t = fixture();
    t.extend_from_slice(TAIL_END);
    t
}

/// Where the transcript lives in a Claude Code directory under `env`'s temp root.
fn transcript_path(env: &TestEnv) -> (PathBuf, PathBuf) {
    let root = env.tmp.path().join("claude");
    let dir = root.join("projects/-home-dev-acme-widgets");
    std::fs::create_dir_all(&dir).unwrap();
    (root, dir.join(format!("{CC_SESSION}.jsonl")))
}

fn event(name: &str, file: &Path) -> Vec<u8> {
    json!({
        "session_id": CC_SESSION,
        "transcript_path": file.display().to_string(),
        "cwd": "/home/dev/acme-widgets",
        "hook_event_name": name,
    })
    .to_string()
    .into_bytes()
}

/// Runs the hook; it must exit 0 and print nothing on stdout.
fn hook(env: &TestEnv, input: &[u8], extra: &[&str]) -> crate::util::Run {
    let mut args = vec!["hook", "claude-code"];
    args.extend_from_slice(extra);
    let r = env.run_stdin(&args, input);
    if r.code != 0 || !r.stdout.is_empty() {
        env.dump(&r);
        panic!("the hook must exit 0 and print nothing");
    }
    r
}

fn log(env: &TestEnv) -> String {
    std::fs::read_to_string(env.path(".memdir/hook.log")).unwrap_or_default()
}

/// The session's segment lines with what legitimately differs between two stores taken out:
/// the replica id and the clock stamp (each store has its own). Everything else must match.
fn normalized_lines(env: &TestEnv) -> Vec<Value> {
    let text = std::fs::read_to_string(env.segment_of(&format!("cc-{CC_SESSION}"))).unwrap();
    text.lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let replica = v["replica"].as_str().unwrap().to_string();
            let hlc = v["hlc"].as_str().unwrap().to_string();
            // Byte for byte apart from the two fields: the line is rewritten with placeholders.
            let same = l
                .replace(&format!("\"replica\":\"{replica}\""), "\"replica\":\"R\"")
                .replace(&format!("\"hlc\":\"{hlc}\""), "\"hlc\":\"H\"");
            v["replica"] = json!("R");
            v["hlc"] = json!("H");
            assert_eq!(serde_json::from_str::<Value>(&same).unwrap(), v);
            json!({"line": same, "parsed": v})
        })
        .collect()
}

/// A store that ran `memdir import claude-code` on the final transcript.
fn imported_store() -> (TestEnv, Vec<Value>) {
    let mut env = TestEnv::new();
    let (root, file) = transcript_path(&env);
    std::fs::write(&file, full_transcript()).unwrap();
    env.set_env("CLAUDE_CONFIG_DIR", root.to_str().unwrap());
    assert_eq!(env.ok(&["import", "claude-code"])["chunks"], 6);
    let lines = normalized_lines(&env);
    (env, lines)
}

/// Drops the title from the first chunk's metadata: a capture attaches the title known when
/// it reads the first chunk; a later import sees titles written after it.
fn without_title(mut lines: Vec<Value>) -> Vec<Value> {
    let mut v = lines[0]["parsed"].take();
    v["metadata"].as_object_mut().unwrap().remove("title");
    lines[0] = json!({"parsed": v});
    lines
}

/// Three hook events on a transcript that grows between them (the second cut inside a line)
/// save exactly the chunks `import claude-code` saves from the final file: same lines byte
/// for byte, apart from replica, clock stamp and the title the first chunk could not know
/// yet. An import after the captures adds nothing, and a capture after the import adds
/// nothing.
#[test]
fn capture_across_three_events_equals_a_full_import() {
    let env = TestEnv::new();
    let (_, file) = transcript_path(&env);
    let all = full_transcript();
    // After line 4 (the first assistant answer), inside line 11, then everything.
    let line_end = |n: usize| {
        all.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(n)
            .unwrap()
            .0
            + 1
    };
    let cut1 = line_end(4);
    let cut2 = line_end(10) + 40;
    std::fs::write(&file, &all[..cut1]).unwrap();
    hook(&env, &event("Stop", &file), &[]);
    let first: Vec<String> = env
        .session_contents(&format!("cc-{CC_SESSION}"))
        .into_iter()
        .collect();
    assert_eq!(first.len(), 2, "{first:?}");
    std::fs::write(&file, &all[..cut2]).unwrap();
    hook(&env, &event("PreCompact", &file), &[]);
    // The compaction summary (line 10) is in; line 11, cut, is not.
    assert_eq!(env.session_contents(&format!("cc-{CC_SESSION}")).len(), 3);
    std::fs::write(&file, &all).unwrap();
    hook(&env, &event("SessionEnd", &file), &[]);
    assert_eq!(log(&env), "", "a clean capture logs nothing");

    let captured = normalized_lines(&env);
    let (imported_env, imported) = imported_store();
    assert_eq!(captured.len(), 6);
    // Line for line, byte for byte (with placeholders), from the second chunk on.
    for i in 1..6 {
        assert_eq!(captured[i]["line"], imported[i]["line"], "chunk {i}");
    }
    // The first chunk: everything but the title, which the import read from a summary
    // naming a record (line 12) that was not written when the first event ran.
    assert_eq!(
        imported[0]["parsed"]["metadata"]["title"],
        "Widget cache TTL flake traced to a double clock read"
    );
    assert!(captured[0]["parsed"]["metadata"].get("title").is_none());
    assert_eq!(without_title(captured.clone()), without_title(imported));

    // Either way round, the second one adds nothing.
    let mut env2 = env;
    env2.set_env(
        "CLAUDE_CONFIG_DIR",
        env2.tmp.path().join("claude").to_str().unwrap(),
    );
    let before = env2.snapshot();
    let again = env2.ok(&["import", "claude-code"]);
    assert_eq!(
        (again["chunks"].clone(), again["existing"].clone()),
        (json!(0), json!(6))
    );
    assert_eq!(env2.snapshot(), before);
    let (_, ifile) = transcript_path(&imported_env);
    let before = imported_env.snapshot();
    hook(&imported_env, &event("Stop", &ifile), &[]);
    assert_eq!(imported_env.snapshot(), before, "the import saved it all");
    env2.assert_clean();
    imported_env.assert_clean();
}

/// A last line still being written is not read, however it parses; once its newline is
/// there, the next event saves it, once.
#[test]
fn a_partial_last_line_waits_for_its_newline() {
    let env = TestEnv::new();
    let (_, file) = transcript_path(&env);
    std::fs::write(&file, fixture()).unwrap();
    hook(&env, &event("Stop", &file), &[]);
    let session = format!("cc-{CC_SESSION}");
    assert_eq!(env.session_contents(&session).len(), 5);
    // A line that parses but has no newline yet.
    let line = json!({"type": "user", "uuid": "u-late", "cwd": "/home/dev/acme-widgets",
                      "message": {"role": "user", "content": "one more thing"}});
    std::fs::write(
        &file,
        [full_transcript(), line.to_string().into_bytes()].concat(),
    )
    .unwrap();
    hook(&env, &event("Stop", &file), &[]);
    let got = env.session_contents(&session);
    assert_eq!(got.len(), 6, "the completed fixture tail, not the new line");
    assert!(!got.contains(&"one more thing".to_string()));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    std::io::Write::write_all(&mut f, b"\n").unwrap();
    hook(&env, &event("Stop", &file), &[]);
    hook(&env, &event("SessionEnd", &file), &[]);
    let got = env.session_contents(&session);
    assert_eq!(got.len(), 7);
    assert_eq!(got[6], "one more thing");
    env.assert_clean();
}

/// A capture killed for real after its chunks are durable (before the ledger records them,
/// or before the cursor is saved) loses nothing and duplicates nothing: the next event reads
/// the same lines again and their keys skip what is saved.
#[test]
fn a_killed_hook_resumes_without_loss_or_duplicates() {
    let (_, imported) = imported_store();
    for point in [
        "append.after_write",
        "cursor.before_save",
        "append.after_intent",
    ] {
        let env = TestEnv::new();
        let (_, file) = transcript_path(&env);
        let all = full_transcript();
        let half = all.len() / 2;
        let half = all[..half].iter().rposition(|b| *b == b'\n').unwrap() + 1;
        std::fs::write(&file, &all[..half]).unwrap();
        hook(&env, &event("Stop", &file), &[]);
        std::fs::write(&file, &all).unwrap();
        let r = env.run_env(
            &["hook", "claude-code"],
            &[("MEMDIR_FAILPOINT", point)],
            &event("Stop", &file),
        );
        assert_eq!(r.signal, Some(6), "{point}: {}", r.run.stderr);
        hook(&env, &event("Stop", &file), &[]);
        hook(&env, &event("SessionEnd", &file), &[]);
        let captured = normalized_lines(&env);
        assert_eq!(
            without_title(captured),
            without_title(imported.clone()),
            "{point}"
        );
        env.assert_clean();
    }
}

/// A deadline cuts a capture short after a whole line; each next event goes on from there
/// and the end result is the full import's.
#[test]
fn a_deadline_stops_cleanly_and_the_next_event_resumes() {
    let env = TestEnv::new();
    let (_, file) = transcript_path(&env);
    std::fs::write(&file, full_transcript()).unwrap();
    let session = format!("cc-{CC_SESSION}");
    let mut runs = 0;
    let mut counts = Vec::new();
    while env.session_contents(&session).len() < 6 {
        runs += 1;
        assert!(runs < 30, "no progress: {counts:?}");
        hook(&env, &event("Stop", &file), &["--timeout-ms", "0"]);
        counts.push(env.session_contents(&session).len());
    }
    assert!(
        runs > 1,
        "a zero budget reads one line per event: {counts:?}"
    );
    assert!(
        log(&env).contains("stopped at its deadline"),
        "{}",
        log(&env)
    );
    let (_, imported) = imported_store();
    assert_eq!(
        without_title(normalized_lines(&env)),
        without_title(imported)
    );
    env.assert_clean();
}

/// Bad events, a missing transcript and a busy store: exit 0, nothing on stdout, not a byte
/// of the memory changed, and a line in `.memdir/hook.log` that says what went wrong.
#[test]
fn bad_events_exit_0_change_nothing_and_leave_a_log_line() {
    let env = TestEnv::new();
    env.ok(&["init"]);
    let (_, file) = transcript_path(&env);
    std::fs::write(&file, full_transcript()).unwrap();
    let before = env.snapshot();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"{not json".to_vec(), "not JSON"),
        (b"[1, 2]".to_vec(), "not a JSON object"),
        (
            br#"{"hook_event_name": "Stop"}"#.to_vec(),
            "no transcript_path",
        ),
        (
            event(
                "Stop",
                &env.tmp.path().join("claude/projects/x/missing.jsonl"),
            ),
            "cannot read the transcript",
        ),
        (
            br#"{"hook_event_name": "Stop", "transcript_path": "relative.jsonl"}"#.to_vec(),
            "not an absolute path",
        ),
        (Vec::new(), "not JSON"),
    ];
    for (i, (input, says)) in cases.iter().enumerate() {
        hook(&env, input, &[]);
        let l = log(&env);
        assert_eq!(l.lines().count(), i + 1, "{l}");
        assert!(l.lines().last().unwrap().contains(says), "{says}: {l}");
        assert_eq!(env.snapshot(), before);
    }

    // A busy store: the hook gives up at once, keeps its cursor, and the next event saves it.
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(env.path(".memdir/lock"))
        .unwrap();
    lock.lock().unwrap();
    let start = std::time::Instant::now();
    hook(&env, &event("Stop", &file), &[]);
    assert!(start.elapsed() < std::time::Duration::from_secs(4));
    assert!(
        log(&env).lines().last().unwrap().contains("busy"),
        "{}",
        log(&env)
    );
    assert_eq!(env.snapshot(), before);
    lock.unlock().unwrap();
    hook(&env, &event("Stop", &file), &[]);
    assert_eq!(env.session_contents(&format!("cc-{CC_SESSION}")).len(), 6);
    env.assert_clean();
}

/// `config --client claude --hooks` merges the three hooks into an existing settings.json,
/// keeping every other key and hook; twice gives the same file; --dry-run prints and writes
/// nothing; a malformed file is refused and left as it is.
#[test]
fn config_hooks_merge_into_claude_settings() {
    let env = TestEnv::new();
    let home = env.tmp.path().join("home");
    let settings = home.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let old = json!({
        "model": "opus",
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "say done"}]}],
                  "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "check"}]}]}
    });
    std::fs::write(&settings, serde_json::to_string_pretty(&old).unwrap()).unwrap();

    // Dry run: the new file on stdout, nothing written.
    let r = env.run(&["config", "--client", "claude", "--hooks", "--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let shown: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        std::fs::read_to_string(&settings).unwrap(),
        serde_json::to_string_pretty(&old).unwrap()
    );

    let out = env.ok(&["config", "--client", "claude", "--hooks"]);
    assert_eq!(out["changed"], true);
    let command = format!("memdir --dir {} hook claude-code", env.dir.display());
    assert_eq!(out["command"], command.as_str());
    let new: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(new, shown, "the dry run showed what was written");
    assert_eq!(new["model"], "opus");
    assert_eq!(new["permissions"], old["permissions"]);
    assert_eq!(new["hooks"]["PreToolUse"], old["hooks"]["PreToolUse"]);
    assert_eq!(new["hooks"]["Stop"][0], old["hooks"]["Stop"][0]);
    for e in ["Stop", "PreCompact", "SessionEnd"] {
        let groups = new["hooks"][e].as_array().unwrap();
        let ours: Vec<&Value> = groups
            .iter()
            .flat_map(|g| g["hooks"].as_array().unwrap())
            .filter(|h| h["command"] == command.as_str())
            .collect();
        assert_eq!(ours.len(), 1, "{e}: {new:#}");
        assert_eq!(ours[0]["type"], "command");
    }

    let bytes = std::fs::read(&settings).unwrap();
    let again = env.ok(&["config", "--client", "claude", "--hooks"]);
    assert_eq!(again["changed"], false);
    assert_eq!(
        std::fs::read(&settings).unwrap(),
        bytes,
        "twice = the same file"
    );

    // No file yet: created. A dry run writes nothing.
    let mut fresh = TestEnv::new();
    let croot = fresh.tmp.path().join("cc-config");
    fresh.set_env("CLAUDE_CONFIG_DIR", croot.to_str().unwrap());
    let r = fresh.run(&["config", "--client", "claude", "--hooks", "--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("hook claude-code"));
    assert!(!croot.exists(), "a dry run writes nothing");
    fresh.ok(&["config", "--client", "claude", "--hooks"]);
    assert!(croot.join("settings.json").is_file());

    // Malformed: refused with exit 3, file untouched.
    std::fs::write(&settings, b"{\"model\": \"opus\",").unwrap();
    let e = env.fail(&["config", "--client", "claude", "--hooks"], 3);
    assert!(
        e["message"].as_str().unwrap().contains("not valid JSON"),
        "{e}"
    );
    assert_eq!(std::fs::read(&settings).unwrap(), b"{\"model\": \"opus\",");
    std::fs::write(&settings, b"{\"hooks\": []}").unwrap();
    env.fail(&["config", "--client", "claude", "--hooks"], 3);
    assert_eq!(std::fs::read(&settings).unwrap(), b"{\"hooks\": []}");
    // Another client has no hook to install.
    env.fail(&["config", "--client", "cursor", "--hooks"], 3);
}

const CODEX_THREAD: &str = "019c8a2e-5f10-7b3d-a8c4-1e2f3a4b5c6d";

/// The Codex fixture with its unterminated last line completed.
fn codex_rollout() -> (Vec<u8>, Vec<u8>) {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/importers/codex-rollout.jsonl");
    let cut = std::fs::read(p).unwrap();
    let mut whole = cut.clone();
    whole.extend_from_slice(b"put.\",\"images\":[]}}\n");
    (cut, whole)
}

/// What Codex passes its `notify` program: one JSON argument.
fn codex_event(kind: &str, thread: &str) -> String {
    json!({
        "type": kind,
        "thread-id": thread,
        "turn-id": "12",
        "cwd": "/home/dev/acme-widgets",
        "input-messages": ["Add a --json flag"],
        "last-assistant-message": "Added it.",
    })
    .to_string()
}

fn codex_hook(env: &TestEnv, arg: &str) {
    let r = env.run(&["hook", "codex", arg]);
    if r.code != 0 || !r.stdout.is_empty() {
        env.dump(&r);
        panic!("the hook must exit 0 and print nothing");
    }
}

/// Codex's notify program, run after each turn while the rollout grows (its last line still
/// being written at one point), saves what `import codex` saves; the import afterwards adds
/// nothing; an unchanged rollout is not read again; bad notifications change nothing and
/// leave a log line; other notification types are ignored.
#[test]
fn codex_notify_capture_equals_a_full_import() {
    let mut env = TestEnv::new();
    let home = env.tmp.path().join("codex");
    env.set_env("CODEX_HOME", home.to_str().unwrap());
    env.ok(&["init"]);
    let day = home.join("sessions/2026/03/02");
    std::fs::create_dir_all(&day).unwrap();
    let file = day.join(format!("rollout-2026-03-02T09-05-11-{CODEX_THREAD}.jsonl"));
    let (cut, whole) = codex_rollout();
    let lines: Vec<&[u8]> = cut.split_inclusive(|&b| b == b'\n').collect();
    let ev = codex_event("agent-turn-complete", CODEX_THREAD);
    for upto in [5, 11, lines.len()] {
        std::fs::write(&file, lines[..upto].concat()).unwrap();
        codex_hook(&env, &ev);
    }
    std::fs::write(&file, &whole).unwrap();
    codex_hook(&env, &ev);
    assert_eq!(log(&env), "", "no problem to log");

    let session = format!("codex-{CODEX_THREAD}");
    let other = TestEnv::new();
    let imported = other.ok(&["import", "codex", home.to_str().unwrap()]);
    assert!(imported["chunks"].as_u64().unwrap() >= 4, "{imported:#}");
    assert_eq!(
        env.session_contents(&session),
        other.session_contents(&session)
    );
    let again = env.ok(&["import", "codex"]);
    assert_eq!(again["chunks"], 0, "{again:#}");

    // Unchanged rollout: nothing read, nothing written.
    let before = env.snapshot();
    codex_hook(&env, &ev);
    assert_eq!(env.snapshot(), before);
    // Other notification types carry no turn.
    codex_hook(&env, &codex_event("approval-requested", CODEX_THREAD));
    assert_eq!(log(&env), "");
    for (arg, says) in [
        ("{not json".to_string(), "not JSON"),
        (
            json!({"type": "agent-turn-complete"}).to_string(),
            "no thread-id",
        ),
        (
            codex_event("agent-turn-complete", "../../etc/passwd"),
            "not a Codex thread id",
        ),
        (
            codex_event(
                "agent-turn-complete",
                "0000aaaa-0000-0000-0000-000000000000",
            ),
            "no rollout of thread",
        ),
    ] {
        codex_hook(&env, &arg);
        assert!(
            log(&env).lines().last().unwrap_or("").contains(says),
            "{says}: {}",
            log(&env)
        );
        assert_eq!(env.snapshot(), before);
    }
    env.assert_clean();
}

/// `config --client codex --hooks` sets the notify program in config.toml, keeping the rest
/// of the file byte for byte; twice changes nothing; another notify program is refused and
/// left alone.
#[test]
fn config_hooks_set_codex_notify() {
    let mut env = TestEnv::new();
    let home = env.tmp.path().join("codex");
    env.set_env("CODEX_HOME", home.to_str().unwrap());
    std::fs::create_dir_all(&home).unwrap();
    let config = home.join("config.toml");
    let old = "# mine\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"other\"\n";
    std::fs::write(&config, old).unwrap();
    let r = env.run(&["config", "--client", "codex", "--hooks", "--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        old,
        "a dry run writes nothing"
    );
    let out = env.ok(&["config", "--client", "codex", "--hooks"]);
    assert_eq!(out["changed"], true);
    let dir = env.dir.display().to_string();
    assert_eq!(
        out["command"],
        json!(["memdir", "--dir", dir, "hook", "codex"])
    );
    let text = std::fs::read_to_string(&config).unwrap();
    assert_eq!(text, r.stdout, "the dry run showed what was written");
    assert_eq!(
        text,
        format!(
            "# mine\nmodel = \"o3\"\n\nnotify = [\"memdir\", \"--dir\", {dir:?}, \"hook\", \"codex\"]\n[mcp_servers.other]\ncommand = \"other\"\n"
        )
    );
    assert_eq!(
        env.ok(&["config", "--client", "codex", "--hooks"])["changed"],
        false
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text);
    let theirs = "notify = [\"notify-send\", \"codex\"]\n";
    std::fs::write(&config, theirs).unwrap();
    let e = env.fail(&["config", "--client", "codex", "--hooks"], 3);
    assert!(e["message"].as_str().unwrap().contains("only one"), "{e}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), theirs);
    let e = env.fail(&["config", "--client", "cursor", "--hooks"], 3);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("claude, codex and opencode"),
        "{e}"
    );
}

const OC_SESSION: &str = "ses_3a1f0c2b9ffeQmV4xT7nK2pLwZ";

fn opencode_event(kind: &str, session: &str) -> String {
    json!({"type": kind, "properties": {"sessionID": session}}).to_string()
}

fn opencode_hook(env: &TestEnv, arg: &str) {
    let r = env.run(&["hook", "opencode", arg]);
    if r.code != 0 || !r.stdout.is_empty() {
        env.dump(&r);
        panic!("the hook must exit 0 and print nothing");
    }
}

/// memdir's opencode plugin runs `memdir hook opencode EVENT` when a session goes idle: the
/// session is saved as `import opencode` saves it, a second event adds nothing, other events
/// and other sessions are left alone, and bad events change nothing and leave a log line.
#[test]
fn opencode_capture_on_session_idle_equals_an_import() {
    let mut env = TestEnv::new();
    let data = env.tmp.path().join("data");
    crate::import::materialise("opencode-storage-tree.json", &data.join("opencode/storage"));
    env.set_env("XDG_DATA_HOME", data.to_str().unwrap());
    env.ok(&["init"]);
    let before = env.snapshot();
    opencode_hook(&env, &opencode_event("session.updated", OC_SESSION));
    assert_eq!(env.snapshot(), before, "only session.idle captures");
    opencode_hook(&env, &opencode_event("session.idle", OC_SESSION));
    assert_eq!(log(&env), "", "{}", log(&env));
    let session = format!("opencode-{OC_SESSION}");
    let captured = env.session_contents(&session);
    assert_eq!(captured.len(), 2, "{captured:?}");
    let mut other = TestEnv::new();
    other.set_env("XDG_DATA_HOME", data.to_str().unwrap());
    other.ok(&["import", "opencode"]);
    assert_eq!(other.session_contents(&session), captured);
    opencode_hook(&env, &opencode_event("session.idle", OC_SESSION));
    assert_eq!(env.ok(&["import", "opencode"])["chunks"], 0);
    assert_eq!(env.session_contents(&session), captured);
    let quiet = env.snapshot();
    for (arg, says) in [
        ("not json".to_string(), "not JSON"),
        (
            json!({"type": "session.idle"}).to_string(),
            "no properties.sessionID",
        ),
        (
            opencode_event("session.idle", "../etc"),
            "not an opencode session id",
        ),
        (
            opencode_event("session.idle", "ses_missing"),
            "no opencode session",
        ),
    ] {
        opencode_hook(&env, &arg);
        assert!(
            log(&env).lines().last().unwrap_or("").contains(says),
            "{says}: {}",
            log(&env)
        );
        assert_eq!(env.snapshot(), quiet);
    }
    env.assert_clean();
}

/// `config --client opencode --hooks` writes memdir's plugin into opencode's plugin directory;
/// twice changes nothing; a file of that name that is not memdir's is refused and left alone.
/// Where node is installed, the plugin is checked to parse as a module.
#[test]
fn config_hooks_write_the_opencode_plugin() {
    let mut env = TestEnv::new();
    let cfg = env.tmp.path().join("xdg-config");
    env.set_env("XDG_CONFIG_HOME", cfg.to_str().unwrap());
    let plugin = cfg.join("opencode/plugins/memdir-capture.js");
    let r = env.run(&["config", "--client", "opencode", "--hooks", "--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!plugin.exists(), "a dry run writes nothing");
    let out = env.ok(&["config", "--client", "opencode", "--hooks"]);
    assert_eq!(out["changed"], true);
    let dir = env.dir.display().to_string();
    assert_eq!(
        out["command"],
        json!(["memdir", "--dir", dir, "hook", "opencode"])
    );
    let text = std::fs::read_to_string(&plugin).unwrap();
    assert_eq!(text, r.stdout, "the dry run showed what was written");
    assert!(
        text.contains("session.idle") && text.contains("\"hook\",\"opencode\""),
        "{text}"
    );
    assert_eq!(
        env.ok(&["config", "--client", "opencode", "--hooks"])["changed"],
        false
    );
    if std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok()
    {
        let m = env.tmp.path().join("plugin-check.mjs");
        std::fs::write(&m, &text).unwrap();
        let check = std::process::Command::new("node")
            .arg("--check")
            .arg(&m)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
    }
    std::fs::write(&plugin, "export const Mine = 1;\n").unwrap();
    let e = env.fail(&["config", "--client", "opencode", "--hooks"], 3);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("not memdir's plugin"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(&plugin).unwrap(),
        "export const Mine = 1;\n"
    );
}
