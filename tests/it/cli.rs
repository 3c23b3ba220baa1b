//! Smoke tests of the CLI's basic round trips.

use serde_json::json;

use crate::util::TestEnv;

#[test]
fn write_read_round_trip() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"name": "Ada"}"#]);
    let r = env.ok(&["read", "base"]);
    assert_eq!(r["data"], json!({"name": "Ada"}));
    assert_eq!(r["meta"]["version"], 1);
    env.assert_clean();
}
