//! This replica's side of segment seals ([`crate::sync::seal`]): its signing secret, kept in
//! `.memdir/replica.json` beside its id (never synced), and the seals of its own segments,
//! written before a sync sends anything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::service::Memdir;
use crate::sync::seal::{self, Signer32};
use memdir_api::error::{Error, IoContext, Result};
use memdir_store::lock::WriteLock;
use memdir_store::{self as store, Layout, codec, fsx, txn};

/// 32 bytes from the operating system's random source.
pub(in crate::service) fn random32() -> Result<[u8; 32]> {
    use std::io::Read;
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| Error::internal(format!("cannot read /dev/urandom for a signing key: {e}")))?;
    Ok(b)
}

/// This replica's signing secret and its replica file: the key from `.memdir/replica`, made on
/// first use for a replica id minted before keys (a store copied elsewhere mints a new id, and
/// with it a new secret). Caller holds the lock and has minted the replica id.
fn secret(layout: &Layout) -> Result<([u8; 32], Value)> {
    let path = layout.replica_path();
    let mut v: Value = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| Error::internal("invariant: the replica id is minted before its key"))?;
    match &v["key"] {
        Value::Null => {}
        k => {
            // A key that is there but unreadable is never replaced: a new key would make every
            // other replica refuse this one's seals as forged.
            let key = k.as_str().and_then(seal::key_from_hex).ok_or_else(|| {
                Error::new(
                    memdir_api::error::ErrorKind::Corrupt,
                    format!(
                        "the signing key in {} is not 64 hex digits; restore it from a backup of this store (a new key would make other replicas refuse this one's seals)",
                        path.display()
                    ),
                )
            })?;
            return Ok((key, v));
        }
    }
    let key = random32()?;
    v["key"] = Value::from(seal::hex(&key));
    let tmp = path.with_extension("tmp");
    fsx::write_synced(&tmp, &codec::to_pretty(&v))?;
    std::fs::rename(&tmp, &path).at("rename", &path)?;
    fsx::sync_dir(&layout.meta_dir())?;
    Ok((key, v))
}

/// The ids (with their keys) this store held before its replica file at `path` is minted
/// again (the store was copied to another machine or path): the segments they wrote are still
/// sealed with their keys, so other replicas keep taking their lines.
pub(in crate::service) fn previous_after_copy(path: &Path) -> Value {
    let Some(old) = std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    else {
        return Value::Array(Vec::new());
    };
    let mut out = previous(&old);
    if let (Some(id), Some(key)) = (old["id"].as_str(), old["key"].as_str())
        && seal::key_from_hex(key).is_some()
        && !out.iter().any(|(p, _)| p == id)
    {
        out.push((id.to_string(), key.to_string()));
    }
    Value::Array(
        out.into_iter()
            .map(|(id, key)| serde_json::json!({"id": id, "key": key}))
            .collect(),
    )
}

/// The `previous` ids of a replica file, with their keys as hex.
fn previous(v: &Value) -> Vec<(String, String)> {
    v["previous"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some((
                p["id"].as_str()?.to_string(),
                p["key"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Where this replica notes each own segment's size and change stamp as it last sealed it,
/// with its seal's (`{path: [len, stamp, seal len, seal stamp]}`): a segment that still has
/// them needs no look. A seal removed or rewritten since (by hand, or a forget withdrawing a
/// salt) is looked at again. A cache: lost or stale, the segments are read and sealed again.
fn sealed_path(layout: &Layout) -> PathBuf {
    layout.meta_dir().join("sealed.json")
}

type Stamps = (u64, i64, u64, i64);

/// The size and change stamp of a segment and of its seal (zeros for a seal not there).
fn stamps(layout: &Layout, s: &store::SegmentFile) -> Stamps {
    let at = layout.root.join(seal::seal_path(&s.rel.to_string_lossy()));
    let (len, stamp) = std::fs::symlink_metadata(at)
        .ok()
        .filter(|m| m.is_file())
        .map_or((0, 0), |m| {
            use std::os::unix::fs::MetadataExt;
            (m.len(), m.mtime() * 1_000_000_000 + m.mtime_nsec())
        });
    (s.len, s.mtime_ns, len, stamp)
}

/// Seals every segment of this replica that changed since it was last sealed, in one
/// transaction. Caller holds the lock.
pub(in crate::service) fn seal_own(m: &Memdir, lock: &WriteLock) -> Result<()> {
    let layout = m.layout();
    let replica = m.replica(lock)?;
    let mut noted: BTreeMap<String, Stamps> = std::fs::read(sealed_path(layout))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    // This replica's id, and the ids this store held before it was copied, with their keys.
    let (key, file) = secret(layout)?;
    let mut signers = vec![(replica, Signer32::new(&key))];
    for (id, key) in previous(&file) {
        if let Some(k) = seal::key_from_hex(&key) {
            signers.push((id, Signer32::new(&k)));
        }
    }
    let mut changed = Vec::new();
    for (_, dir) in store::list_session_dirs(layout)? {
        for s in store::list_segments(layout, &dir)? {
            let rel = s.rel.to_string_lossy().into_owned();
            if signers.iter().any(|(id, _)| *id == s.replica)
                && noted.get(&rel) != Some(&stamps(layout, &s))
            {
                changed.push(s);
            }
        }
    }
    if changed.is_empty() {
        return Ok(());
    }
    let writes: Vec<txn::FileWrite> = signers
        .iter()
        .flat_map(|(id, signer)| seal::own_seals(&layout.root, id, signer, &changed))
        .collect();
    if !writes.is_empty() {
        // DURABILITY: the seals are written before anything is sent; a crash leaves the old
        // seals, and the next sync writes them again.
        txn::commit(&layout.root, &layout.staging(), "seal", &writes)?;
    }
    for s in &changed {
        let now = stamps(layout, s);
        // A segment left unsealed (unreadable) is looked at again next time.
        if now.2 > 0 {
            noted.insert(s.rel.to_string_lossy().into_owned(), now);
        }
    }
    let tmp = sealed_path(layout).with_extension("tmp");
    let bytes = serde_json::to_vec(&noted).map_err(|e| Error::internal(e.to_string()))?;
    fsx::write_synced(&tmp, &bytes)?;
    std::fs::rename(&tmp, sealed_path(layout)).at("rename", &sealed_path(layout))?;
    Ok(())
}

/// The seal files of the session directory `session_rel` under `root`, sorted (regular files
/// with a seal's name only).
pub(in crate::service) fn seal_files(root: &Path, session_rel: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(root.join(session_rel)) else {
        return Vec::new();
    };
    let mut out: Vec<_> = rd
        .flatten()
        .filter(|e| fsx::entry_kind(e) == fsx::EntryKind::File)
        .filter(|e| crate::sync::gate::file_name_ok(&e.file_name().to_string_lossy(), seal::SUFFIX))
        .map(|e| session_rel.join(e.file_name()))
        .collect();
    out.sort();
    out
}
