//! Failpoints: named steps of the commit protocol where a test can make the process abort
//! for real, or an I/O call fail.
//!
//! Armed by the environment: `MEMDIR_FAILPOINT=txn.after_manifest` aborts at that step;
//! `MEMDIR_FAILPOINT=stage.write=enospc` makes that I/O step fail with "no space left on
//! device"; `MEMDIR_FAILPOINT=catchup.before_snapshot=pause:800` sleeps 800 ms there, so a test
//! can make another process act inside a race window. Compiled in debug builds and with the `failpoints` feature; release builds ignore
//! the variable.

use std::sync::OnceLock;

fn armed() -> Option<&'static (String, String)> {
    static ARMED: OnceLock<Option<(String, String)>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            if !(cfg!(debug_assertions) || cfg!(feature = "failpoints")) {
                return None;
            }
            let spec = crate::env::process_raw("MEMDIR_FAILPOINT")?;
            let (name, action) = spec.split_once('=').unwrap_or((&spec, "abort"));
            Some((name.to_string(), action.to_string()))
        })
        .as_ref()
}

/// Aborts the process if `name` is armed with the action `abort`.
pub fn hit(name: &str) {
    if let Some((n, action)) = armed()
        && n == name
        && action == "abort"
    {
        eprintln!("memdir: failpoint {name}: aborting");
        std::process::abort();
    }
}

/// Sleeps if `name` is armed with `pause:<ms>`, after saying so on stderr: a race window a
/// test can act inside.
pub fn pause(name: &str) {
    let Some((n, action)) = armed() else { return };
    if n != name {
        return;
    }
    if let Some(ms) = action.strip_prefix("pause:").and_then(|m| m.parse().ok()) {
        eprintln!("memdir: failpoint {name}: pausing {ms} ms");
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// Fails with ENOSPC if `name` is armed with `enospc`: a step that writes derived state on the
/// read path (the index's commit, the ledger's refresh), where a full disk must not stop reads.
pub fn fault(name: &str) -> std::io::Result<()> {
    if let Some((n, action)) = armed()
        && n == name
        && action == "enospc"
    {
        return Err(std::io::Error::from_raw_os_error(28));
    }
    Ok(())
}

/// Fails with ENOSPC if `name` is armed with the action `enospc`.
pub fn io(name: &str) -> std::io::Result<()> {
    hit(name);
    if let Some((n, action)) = armed()
        && n == name
        && action == "enospc"
    {
        return Err(std::io::Error::from_raw_os_error(28));
    }
    Ok(())
}

/// Whether `name` is armed with exactly `action` (e.g. `corrupt`: a test damages data in
/// transit at that step).
pub fn armed_as(name: &str, action: &str) -> bool {
    armed().is_some_and(|(n, a)| n == name && a == action)
}
