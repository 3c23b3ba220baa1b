//! The operation table's derived artefacts stay in step with it.

use crate::util::TestEnv;

/// `schema/openapi.json` is generated from the operation table by `memdir openapi`; a change
/// to an operation that is not regenerated fails here.
#[test]
fn the_committed_openapi_document_is_the_generated_one() {
    let env = TestEnv::new();
    let generated = env.ok(&["openapi"]);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/openapi.json");
    let committed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(
        generated == committed,
        "schema/openapi.json is stale: run `memdir openapi > schema/openapi.json`"
    );
}

/// Every operation's CLI command exists and its help names every argument of its request.
#[test]
fn every_cli_command_of_the_table_exists_with_help() {
    let env = TestEnv::new();
    let table = env.ok(&["ops"]);
    for op in table["operations"].as_array().unwrap() {
        let Some(cli) = op["cli"].as_object() else {
            continue;
        };
        let cmd = cli["command"].as_str().unwrap();
        // A group's command is two words (`note read`).
        let mut args: Vec<&str> = cmd.split(' ').collect();
        args.push("--help");
        let r = env.run(&args);
        assert_eq!(r.code, 0, "memdir {cmd} --help: {}", r.stderr);
        for (_, flag) in cli["flags"].as_object().unwrap() {
            assert!(r.stdout.contains(flag.as_str().unwrap()), "{cmd}: {flag}");
        }
    }
}
