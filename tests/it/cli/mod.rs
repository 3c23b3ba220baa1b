//! The CLI, command by command: every round trip and every error path, driving the built
//! binary the way a user or a hook does.
//!
//! One module per area of the CLI; the helpers they share live here.

mod blame;
mod cas;
mod categories;
mod corrupt;
mod history;
mod human;
mod ingest;
mod logs;
mod names;
mod overview;
mod review;
mod roundtrip;

use serde_json::Value;

use crate::util::TestEnv;

/// A 64-digit hash that no content has.
const NO_SUCH_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// blake3 of a file inside the store, as memdir reports it.
fn hash_of(env: &TestEnv, rel: &str) -> String {
    blake3::hash(&std::fs::read(env.path(rel)).unwrap())
        .to_hex()
        .to_string()
}

/// History file names of a category, oldest first.
fn history_files(env: &TestEnv, stem: &str) -> Vec<String> {
    let dir = env.path(&format!("history/{stem}"));
    let mut v: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// Every file and directory under the test's temp root that is not inside the store (the
/// empty `home/` aside).
fn entries_outside_store(env: &TestEnv) -> Vec<String> {
    let root = env.tmp.path();
    walkdir::WalkDir::new(root)
        .min_depth(1)
        .into_iter()
        .filter_entry(|e| e.path() != env.dir)
        .flatten()
        .map(|e| e.path().strip_prefix(root).unwrap().display().to_string())
        .filter(|p| p != "home")
        .collect()
}

/// Runs with stdin and requires exit `code`; returns the error object.
fn fail_stdin(env: &TestEnv, args: &[&str], input: &[u8], code: i32) -> Value {
    let r = env.run_stdin(args, input);
    if r.code != code {
        env.dump(&r);
        panic!("`{}` exited {}, expected {code}", r.cmd, r.code);
    }
    r.error()
}

/// Whether `s` is an HLC stamp `YYYYMMDDTHHMMSSmmmZ-CCCC`.
fn is_hlc(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, c)| match i {
            8 => *c == b'T',
            18 => *c == b'Z',
            19 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
}

fn names(list: &Value) -> Vec<String> {
    list["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

fn contents(fetch: &Value) -> Vec<String> {
    fetch["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["content"].as_str().unwrap().to_string())
        .collect()
}
