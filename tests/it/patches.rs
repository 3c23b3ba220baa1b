//! History entries written as patches (store format 2): a merge into a large category records
//! the keys it changed, every version still reads back whole, and whatever takes a base
//! version away (forget, compact) first writes the patches on it whole.

use serde_json::{Map, Value, json};

use crate::util::TestEnv;

/// The history entries of a category as files: (id, parsed entry), oldest first.
fn entries(env: &TestEnv, stem: &str) -> Vec<(String, Value)> {
    let dir = env.path(&format!("history/{stem}"));
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let id = e
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".json")
                .to_string();
            let v: Value = serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
            (id, v)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A category of `n` keys, each value a sentence long enough to make a one-key change small.
pub(crate) fn big(n: usize) -> Map<String, Value> {
    (0..n)
        .map(|i| {
            (
                format!("key{i:04}"),
                json!({"note": format!("value {i} of the large category, with some words"), "n": i}),
            )
        })
        .collect()
}

/// Writes `big(200)`, then `merges` merges changing one key each (every fifth also removing
/// one); returns the expected content of every version, version 1 first.
fn write_and_merge(env: &TestEnv, merges: usize) -> Vec<Value> {
    let mut model = big(200);
    env.ok(&[
        "write",
        "big",
        "--data",
        &Value::Object(model.clone()).to_string(),
    ]);
    let mut versions = vec![Value::Object(model.clone())];
    for i in 0..merges {
        let mut data = Map::new();
        data.insert(format!("key{:04}", i % 200), json!({"changed": i}));
        if i % 5 == 4 {
            data.insert(format!("key{:04}", 199 - i), Value::Null);
        }
        for (k, v) in &data {
            if v.is_null() {
                model.remove(k);
            } else {
                model.insert(k.clone(), v.clone());
            }
        }
        env.ok(&[
            "write",
            "big",
            "--merge",
            "--data",
            &Value::Object(data).to_string(),
        ]);
        versions.push(Value::Object(model.clone()));
    }
    versions
}

fn assert_every_version_reads_back(env: &TestEnv, versions: &[Value]) {
    for (i, want) in versions.iter().enumerate() {
        let v = (i + 1).to_string();
        assert_eq!(
            &env.ok(&["read", "big", "--version", &v])["data"],
            want,
            "version {v}"
        );
    }
}

#[test]
fn merges_into_a_large_category_are_recorded_as_patches_and_every_version_reads_back() {
    let env = TestEnv::new();
    env.ok(&["write", "small", "--data", r#"{"a": 1}"#]);
    assert_eq!(env.read("memdir.json"), "{\n  \"format\": 1\n}\n");
    let versions = write_and_merge(&env, 40);
    // The first patch raised the format: an older memdir refuses the store.
    assert_eq!(env.read("memdir.json"), "{\n  \"format\": 2\n}\n");
    let es = entries(&env, "big");
    assert_eq!(es.len(), 41);
    let whole_size = serde_json::to_vec(&es[0].1).unwrap().len();
    let mut depths = Vec::new();
    for (i, (id, e)) in es.iter().enumerate() {
        match e.get("patch") {
            Some(p) => {
                assert_eq!(e["content"], Value::Null, "{id}");
                assert_eq!(
                    p["base"],
                    es[i - 1].1["id"],
                    "a patch is based on its parent"
                );
                assert!(
                    serde_json::to_vec(e).unwrap().len() * 10 < whole_size,
                    "a one-key patch is small"
                );
                depths.push(p["depth"].as_u64().unwrap());
            }
            None => depths.push(0),
        }
    }
    // A whole entry, 32 patches on it, a whole entry again, then patches on that.
    let want: Vec<u64> = (0..=32).chain(0..8).collect();
    assert_eq!(depths, want);
    assert_every_version_reads_back(&env, &versions);
    let d = env.ok(&["diff", "big", "--from", "2", "--to", "3"]);
    let text = d["diff"].as_str().unwrap();
    assert!(text.contains("+    \"changed\": 1"), "{text}");
    // Restoring a version written as a patch gives its whole content.
    env.ok(&["restore", "big", "--version", "20"]);
    assert_eq!(env.category_data("big").unwrap(), versions[19]);
    env.assert_clean();
}

#[test]
fn a_replacing_write_or_a_large_merge_is_recorded_whole() {
    let env = TestEnv::new();
    env.ok(&[
        "write",
        "big",
        "--data",
        &Value::Object(big(50)).to_string(),
    ]);
    env.ok(&[
        "write",
        "big",
        "--data",
        &Value::Object(big(60)).to_string(),
    ]);
    // A merge that changes most of the category.
    let mut most = big(60);
    for v in most.values_mut() {
        *v = json!("replaced");
    }
    env.ok(&[
        "write",
        "big",
        "--merge",
        "--data",
        &Value::Object(most).to_string(),
    ]);
    assert!(
        entries(&env, "big")
            .iter()
            .all(|(_, e)| e.get("patch").is_none())
    );
    assert_eq!(env.read("memdir.json"), "{\n  \"format\": 1\n}\n");
    env.assert_clean();
}

#[test]
fn forgetting_a_base_version_writes_the_patch_on_it_whole_and_every_other_version_reads_back() {
    let env = TestEnv::new();
    let versions = write_and_merge(&env, 6);
    env.ok(&["forget", "--category", "big", "--version", "3", "--yes"]);
    let es = entries(&env, "big");
    assert_eq!(es[2].1["content"], Value::Null);
    assert!(
        es[2].1.get("patch").is_none(),
        "a forgotten version keeps no change"
    );
    assert!(es[2].1["forgotten"].is_string());
    // Version 4 was a patch of version 3: it is whole now; version 5 is still a patch of 4.
    assert!(es[3].1.get("patch").is_none());
    assert_eq!(es[3].1["content"], versions[3]);
    assert_eq!(es[4].1["patch"]["base"], es[3].1["id"]);
    for (i, want) in versions.iter().enumerate() {
        let r = env.ok(&["read", "big", "--version", &(i + 1).to_string()]);
        if i == 2 {
            assert_eq!(r["data"], Value::Null);
        } else {
            assert_eq!(&r["data"], want, "version {}", i + 1);
        }
    }
    env.assert_clean();
}

#[test]
fn compaction_writes_the_oldest_kept_patch_whole() {
    let env = TestEnv::new();
    let versions = write_and_merge(&env, 10);
    let c = env.ok(&["compact", "big", "--keep", "4"]);
    assert_eq!(c["removed"], json!(7));
    let es = entries(&env, "big");
    assert_eq!(es.len(), 4);
    assert!(
        es[0].1.get("patch").is_none(),
        "the oldest kept version is whole"
    );
    assert_eq!(es[0].1["content"], versions[7]);
    for i in 8..=11 {
        assert_eq!(
            env.ok(&["read", "big", "--version", &i.to_string()])["data"],
            versions[i - 1]
        );
    }
    env.assert_clean();
}

#[test]
fn a_patch_whose_base_is_gone_is_reported_and_breaks_only_itself() {
    let env = TestEnv::new();
    let versions = write_and_merge(&env, 3);
    let es = entries(&env, "big");
    // Removed by hand, outside memdir: version 3 (a patch) loses its base.
    std::fs::remove_file(env.path(&format!("history/big/{}.json", es[1].0))).unwrap();
    assert_eq!(env.category_data("big").unwrap(), versions[3]);
    assert_eq!(
        env.ok(&["read", "big", "--version", "1"])["data"],
        versions[0]
    );
    let r = env.run(&["verify-store"]);
    assert_eq!(r.code, 1);
    let out = &r.stdout;
    assert!(out.contains("is missing"), "{out}");
    // Reading the broken version says why (version 1 above still reads).
    let e = env.fail(&["read", "big", "--version", "3"], 7);
    assert!(
        e["message"].as_str().unwrap().contains("cannot be read"),
        "{e:#}"
    );
    // It can still be forgotten (nothing of it needs resolving for that).
    env.ok(&["forget", "--category", "big", "--version", "3", "--yes"]);
    let v3 = &entries(&env, "big")[1].1;
    assert!(v3["forgotten"].is_string() && v3.get("patch").is_none() && v3["content"].is_null());
    // A merge still works, and is written whole: its parent's chain is broken.
    env.ok(&["write", "big", "--merge", "--data", r#"{"key0000": 7}"#]);
    let last = entries(&env, "big").pop().unwrap().1;
    assert!(last.get("patch").is_none());
    assert_eq!(last["content"]["key0000"], json!(7));
    assert_eq!(last["content"]["key0001"], versions[3]["key0001"]);
}

#[test]
fn a_tampered_patch_is_caught_by_verify() {
    let env = TestEnv::new();
    write_and_merge(&env, 2);
    let es = entries(&env, "big");
    let (id, mut e) = es[2].clone();
    e["patch"]["set"]["key0001"] = json!("tampered");
    env.write_file(
        &format!("history/big/{id}.json"),
        &serde_json::to_string_pretty(&e).unwrap(),
    );
    let r = env.run(&["verify-store"]);
    assert_eq!(r.code, 1);
    let out = &r.stdout;
    assert!(out.contains("does not give its hash"), "{out}");
}
