//! Recovery of a store a process left mid-write: every staged transaction is rolled forward
//! from its manifest or discarded ([`txn::recover_one`]), and an append that left an intent
//! file is undone ([`segment::undo_intent`]). It sits above both, so neither knows the other.

use std::fs;
use std::path::Path;

use crate::fsx::sync_dir;
use crate::segment;
use crate::txn::{Recovered, recover_one};
use memdir_api::error::{IoContext, IoError};

/// Lists staged transactions (for status and verify-store).
pub fn pending(staging: &Path) -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir(staging)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Recovers every staged transaction. The caller holds the write lock.
pub fn recover(root: &Path, staging: &Path) -> Result<Vec<(String, Recovered)>, IoError> {
    let mut out = Vec::new();
    for name in pending(staging) {
        let dir = staging.join(&name);
        if !dir.is_dir() {
            if name.ends_with(".append") {
                segment::undo_intent(root, &dir)?;
                out.push((name, Recovered::Discarded));
            } else {
                fs::remove_file(&dir).at("remove stray staging file", &dir)?;
            }
            continue;
        }
        let outcome = recover_one(root, &dir)?;
        fs::remove_dir_all(&dir).at("remove staging", &dir)?;
        out.push((name, outcome));
    }
    if !out.is_empty() {
        sync_dir(staging)?;
    }
    Ok(out)
}
