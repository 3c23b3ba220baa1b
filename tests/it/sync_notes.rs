//! Notes travel with sync, over git and over HTTP, with the rules of categories: versions are
//! write-once, concurrent edits are both kept in history and resolved the same way on every
//! replica, and a remote can neither rewrite nor erase a note's acknowledged versions.

use serde_json::{Value, json};

use crate::sync::{Fleet, assert_identical};
use crate::util::{Served, TestEnv};

fn text(e: &TestEnv, path: &str) -> String {
    e.ok(&["note", "read", path])["text"]
        .as_str()
        .unwrap()
        .to_string()
}

fn versions(e: &TestEnv, path: &str) -> Vec<Value> {
    e.ok(&["note", "history", path, "--limit", "100"])["versions"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn notes_travel_over_git_and_concurrent_edits_keep_both_versions() {
    let fleet = Fleet::new(2);
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    a.ok(&["note", "write", "MEMORY.md", "--text", "# Memory\n- one\n"]);
    a.ok(&[
        "note",
        "write",
        "projects/orbital.md",
        "--text",
        "# Orbital\n",
    ]);
    fleet.sync(0, &[]);
    fleet.sync(1, &[]);
    assert_eq!(text(b, "MEMORY.md"), "# Memory\n- one\n");
    assert_eq!(text(b, "projects/orbital.md"), "# Orbital\n");
    // Both edit the same note offline.
    a.ok(&["note", "append", "MEMORY.md", "--text", "- from a"]);
    b.ok(&["note", "append", "MEMORY.md", "--text", "- from b"]);
    b.ok(&["note", "mv", "projects/orbital.md", "archive/orbital.md"]);
    fleet.converge();
    fleet.assert_identical();
    // Last writer wins the file; both versions stay in history, under a version naming both.
    let served = text(a, "MEMORY.md");
    assert!(
        served.ends_with("- from b\n") || served.ends_with("- from a\n"),
        "{served}"
    );
    let h = versions(a, "MEMORY.md");
    let texts: Vec<String> = h
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_string())
        .map(|id| {
            a.ok(&["note", "read", "MEMORY.md", "--version", &id])["text"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert!(texts.iter().any(|t| t.ends_with("- from a\n")), "{texts:?}");
    assert!(texts.iter().any(|t| t.ends_with("- from b\n")), "{texts:?}");
    assert_eq!(h[0]["actor"], "sync");
    assert_eq!(h[0]["parents"].as_array().unwrap().len(), 2);
    // The rename travelled; the note is searchable on the other replica.
    assert_eq!(text(a, "archive/orbital.md"), "# Orbital\n");
    a.fail(&["note", "read", "projects/orbital.md"], 4);
    assert_eq!(
        a.ok(&["search", "Orbital", "--kind", "note"])["results"][0]["path"],
        "archive/orbital.md"
    );
    // A note edited with plain git on one replica is adopted, not lost.
    a.write_file(
        "notes/MEMORY.md",
        "# Memory\nedited in an editor, committed with git\n",
    );
    let d = a.dir.clone();
    crate::sync::git(
        &d,
        &[
            "-c",
            "user.name=x",
            "-c",
            "user.email=x@y",
            "commit",
            "-qam",
            "hand",
        ],
    );
    crate::sync::git(&d, &["push", "-q", "origin", "HEAD:main"]);
    let v = fleet.sync(1, &[]);
    assert!(v["reported"].to_string().contains("adopted"), "{v:#}");
    assert_eq!(
        text(b, "MEMORY.md"),
        "# Memory\nedited in an editor, committed with git\n"
    );
    fleet.converge();
    fleet.assert_identical();
}

#[test]
fn a_remote_cannot_rewrite_or_erase_a_notes_versions() {
    let fleet = Fleet::new(2);
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    a.ok(&[
        "note",
        "write",
        "keep.md",
        "--text",
        "the acknowledged text\n",
    ]);
    let branch = fleet.sync(0, &[])["branch"].as_str().unwrap().to_string();
    fleet.sync(1, &[]);
    // Someone rewrites the version in the remote and deletes the note's file there.
    let clone = fleet.remote.parent().unwrap().join("attacker");
    crate::sync::git(
        fleet.remote.parent().unwrap(),
        &[
            "clone",
            "-q",
            "-b",
            &branch,
            &fleet.url(),
            clone.to_str().unwrap(),
        ],
    );
    let hist_dir = clone.join("note-history/keep.md");
    let entry = std::fs::read_dir(&hist_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let forged = std::fs::read_to_string(&entry)
        .unwrap()
        .replace("the acknowledged text", "forged text");
    std::fs::write(&entry, forged).unwrap();
    std::fs::remove_file(clone.join("notes/keep.md")).unwrap();
    crate::sync::git(
        &clone,
        &[
            "-c",
            "user.name=x",
            "-c",
            "user.email=x@y",
            "commit",
            "-qam",
            "rewrite",
        ],
    );
    crate::sync::git(&clone, &["push", "-q", "origin", &format!("HEAD:{branch}")]);
    let v = fleet.sync(1, &[]);
    let reported = v["reported"].to_string();
    assert!(reported.contains("note-history/keep.md"), "{v:#}");
    assert_eq!(text(b, "keep.md"), "the acknowledged text\n");
    assert_eq!(versions(b, "keep.md").len(), 1);
    // The replicas push their copy back: the remote holds the note again.
    fleet.converge();
    assert_eq!(text(a, "keep.md"), "the acknowledged text\n");
}

#[test]
fn notes_travel_over_http_with_the_rights_of_their_paths() {
    let replicas: Vec<TestEnv> = (0..2).map(crate::sync_http::replica).collect();
    replicas[0].ok(&["note", "write", "hub.md", "--text", "from the hub\n"]);
    let server = Served::start(&replicas[0], &["--token", crate::sync_http::TOKEN]);
    replicas[1].ok(&["note", "write", "laptop/todo.md", "--text", "- buy milk\n"]);
    crate::sync_http::sync(&replicas[1], &server.url);
    assert_eq!(text(&replicas[1], "hub.md"), "from the hub\n");
    assert_eq!(text(&replicas[0], "laptop/todo.md"), "- buy milk\n");
    // Concurrent edits on both sides resolve the same way on both.
    replicas[0].ok(&["note", "append", "hub.md", "--text", "hub edit"]);
    replicas[1].ok(&["note", "append", "hub.md", "--text", "laptop edit"]);
    crate::sync_http::sync(&replicas[1], &server.url);
    crate::sync_http::sync(&replicas[1], &server.url);
    assert_eq!(text(&replicas[0], "hub.md"), text(&replicas[1], "hub.md"));
    assert_eq!(
        versions(&replicas[0], "hub.md").len(),
        versions(&replicas[1], "hub.md").len()
    );
    assert_eq!(
        replicas[0].ok(&["search", "milk", "--kind", "note"])["count"],
        json!(1)
    );
    drop(server);
    assert_identical(&replicas);
}
