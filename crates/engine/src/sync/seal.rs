//! Segment seals: each replica signs the lines it wrote, so another replica can tell them from
//! a remote's rewrite even for a segment it has never held.
//!
//! A segment `sessions/<id>/<replica>[.<n>].jsonl` is appended to by its own replica only
//! ([`super::gate`]). Before a sync sends anything, that replica writes beside it the seal
//! `sessions/<id>/<replica>[.<n>].head`: one JSON line holding its ed25519 public key, a leaf per
//! line and a signature over them. A leaf is the first 12 bytes of BLAKE3 of a per-line salt and
//! the line; the salt comes from the replica's secret, so only it can make leaves, and anyone
//! holding the seal can check a live line against its leaf. A forget withdraws the line's salt
//! with its text (the salt is not signed): a withdrawn line's leaf then confirms no guess of the
//! forgotten text, and its tombstone needs no check (a forget is a right of its own).
//!
//! What a replica takes from outside (the gate's rules, docs/design/replication.md):
//! - a seal only if it verifies under the key this replica holds for that replica (the key of
//!   any seal of it already held; the first seen is trusted), and only as an extension of the
//!   seal held (the same leaves, then more);
//! - a live line of another replica's segment only if the seal vouches for it, once this
//!   replica knows that replica's key;
//! - a copy of a segment whose held lines the seal does not vouch for (taken before the seal
//!   arrived) is replaced by a copy the seal vouches for whole.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use memdir_store::model::{ChunkRecord, decode_component};
use memdir_store::{codec, fsx, txn};

/// The file suffix of a seal (beside its segment's `.jsonl`).
pub const SUFFIX: &str = ".head";
/// Bytes of a leaf and of a salt.
const LEAF: usize = 12;
const ZERO: [u8; LEAF] = [0; LEAF];

/// A segment's seal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seal {
    pub replica: String,
    pub key: [u8; 32],
    /// One per sealed line.
    pub leaves: Vec<[u8; LEAF]>,
    /// One per sealed line; zero where the line was withdrawn by a forget.
    pub salts: Vec<[u8; LEAF]>,
    pub sig: [u8; 64],
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    seal: u32,
    replica: String,
    key: String,
    leaves: String,
    salts: String,
    sig: String,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

fn chunks(b: &[u8]) -> Vec<[u8; LEAF]> {
    b.chunks_exact(LEAF)
        .map(|c| c.try_into().expect("invariant: chunks_exact"))
        .collect()
}

/// The seal path of a segment path (`….jsonl` → `….head`).
pub fn seal_path(segment: &str) -> String {
    format!("{}{SUFFIX}", segment.trim_end_matches(".jsonl"))
}

/// The segment path of a seal path (a segment path stays as it is).
pub fn segment_path(path: &str) -> String {
    match path.strip_suffix(SUFFIX) {
        Some(stem) => format!("{stem}.jsonl"),
        None => path.to_string(),
    }
}

/// What a seal signs: the segment's place, its replica and key, and the leaves.
fn message(place: &str, replica: &str, key: &[u8; 32], leaves: &[[u8; LEAF]]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(b"memdir seal v1\0");
    h.update(segment_path(place).as_bytes());
    h.update(b"\0");
    h.update(replica.as_bytes());
    h.update(b"\0");
    h.update(key);
    for l in leaves {
        h.update(l);
    }
    *h.finalize().as_bytes()
}

fn leaf(salt: &[u8; LEAF], line: &[u8]) -> [u8; LEAF] {
    let mut h = blake3::Hasher::new();
    h.update(salt);
    h.update(line);
    h.finalize().as_bytes()[..LEAF]
        .try_into()
        .expect("invariant: LEAF bytes")
}

/// A segment's whole lines without their newlines.
fn lines(segment: &[u8]) -> Vec<&[u8]> {
    let end = segment
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    segment[..end]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect()
}

fn tombstone(line: &[u8]) -> bool {
    codec::parse_chunk_line(line).is_ok_and(|c: ChunkRecord| c.is_tombstone())
}

impl Seal {
    /// Parses a seal file; `Err` says why it is not one.
    pub fn parse(bytes: &[u8]) -> Result<Seal, String> {
        let w: Wire = serde_json::from_slice(bytes).map_err(|e| format!("not a seal: {e}"))?;
        if w.seal != 1 {
            return Err(format!("seal format {} (this memdir reads 1)", w.seal));
        }
        let key: [u8; 32] = unhex(&w.key)
            .and_then(|k| k.try_into().ok())
            .ok_or("the key is not 32 bytes of hex")?;
        let sig: [u8; 64] = unhex(&w.sig)
            .and_then(|k| k.try_into().ok())
            .ok_or("the signature is not 64 bytes of hex")?;
        let leaves = unhex(&w.leaves).ok_or("leaves are not hex")?;
        let salts = unhex(&w.salts).ok_or("salts are not hex")?;
        if !leaves.len().is_multiple_of(LEAF) || salts.len() != leaves.len() {
            return Err("leaves and salts are not one per line".into());
        }
        Ok(Seal {
            replica: w.replica,
            key,
            leaves: chunks(&leaves),
            salts: chunks(&salts),
            sig,
        })
    }

    /// The file's bytes: one line of JSON.
    pub fn to_bytes(&self) -> Vec<u8> {
        let w = Wire {
            seal: 1,
            replica: self.replica.clone(),
            key: hex(&self.key),
            leaves: hex(&self.leaves.concat()),
            salts: hex(&self.salts.concat()),
            sig: hex(&self.sig),
        };
        let mut b = serde_json::to_vec(&w).expect("invariant: a seal serializes");
        b.push(b'\n');
        b
    }

    /// Whether the signature is the key's over these leaves, for the segment at `place`.
    pub fn verifies(&self, place: &str) -> bool {
        let Ok(key) = VerifyingKey::from_bytes(&self.key) else {
            return false;
        };
        let m = message(place, &self.replica, &self.key, &self.leaves);
        key.verify(&m, &Signature::from_bytes(&self.sig)).is_ok()
    }

    /// Whether line `i` (without its newline) is the sealed one: a live line needs its salt
    /// and its leaf; a tombstone needs nothing (a forget is checked as a forget).
    pub fn vouches(&self, i: usize, line: &[u8]) -> bool {
        if tombstone(line) {
            return true;
        }
        match (self.leaves.get(i), self.salts.get(i)) {
            (Some(l), Some(s)) if *s != ZERO => leaf(s, line) == *l,
            _ => false,
        }
    }

    /// The seal of a replica whose key is known but whose seal of this segment is not here:
    /// it vouches for no line.
    pub fn unsealed(replica: &str) -> Seal {
        Seal {
            replica: replica.to_string(),
            key: [0; 32],
            leaves: Vec::new(),
            salts: Vec::new(),
            sig: [0; 64],
        }
    }

    /// The first line of `segment` the seal does not vouch for, if any.
    pub fn first_unvouched(&self, segment: &[u8]) -> Option<usize> {
        self.first_unvouched_after(segment, 0)
    }

    /// The first line of `segment` from line `from` on that the seal does not vouch for.
    pub fn first_unvouched_after(&self, segment: &[u8], from: usize) -> Option<usize> {
        lines(segment)
            .iter()
            .enumerate()
            .skip(from)
            .find(|(i, l)| !self.vouches(*i, l))
            .map(|(i, _)| i)
    }

    /// Whether `segment` holds a line the seal covers and does not vouch for: a copy of the
    /// segment that is not the one its replica wrote (lines past the seal are not yet sealed,
    /// not contradicted).
    /// A live line whose salt was withdrawn was forgotten elsewhere: not a contradiction.
    pub fn contradicts(&self, segment: &[u8]) -> bool {
        lines(segment)
            .iter()
            .take(self.leaves.len())
            .enumerate()
            .any(|(i, l)| self.salts[i] != ZERO && !self.vouches(i, l))
    }

    /// Withdraws the salt of every line of `segment` that is a tombstone. `true` if one was.
    pub fn withdraw_forgotten(&mut self, segment: &[u8]) -> bool {
        let mut changed = false;
        for (i, l) in lines(segment).iter().enumerate() {
            if i < self.salts.len() && self.salts[i] != ZERO && tombstone(l) {
                self.salts[i] = ZERO;
                changed = true;
            }
        }
        changed
    }

    /// This seal and `other` (both verified, of one segment) as one: the longer leaves (the
    /// shorter must be their prefix), every salt either withdrew withdrawn. `None` when they
    /// disagree on a leaf or a key: one of them was not made by the segment's replica.
    pub fn merge(&self, other: &Seal) -> Option<Seal> {
        if self.key != other.key || self.replica != other.replica {
            return None;
        }
        let (long, short) = if other.leaves.len() > self.leaves.len() {
            (other, self)
        } else {
            (self, other)
        };
        if long.leaves[..short.leaves.len()] != short.leaves[..] {
            return None;
        }
        let mut out = long.clone();
        for (i, s) in short.salts.iter().enumerate() {
            if *s == ZERO {
                out.salts[i] = ZERO;
            }
        }
        Some(out)
    }
}

/// A replica's signing key, from the 32-byte secret in `.memdir/replica.json`.
pub struct Signer32 {
    key: SigningKey,
    salts: [u8; 32],
}

impl Signer32 {
    pub fn new(secret: &[u8; 32]) -> Signer32 {
        Signer32 {
            key: SigningKey::from_bytes(secret),
            salts: blake3::derive_key("memdir seal salts v1", secret),
        }
    }

    pub fn public(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    fn salt(&self, place: &str, i: usize) -> [u8; LEAF] {
        let mut h = blake3::Hasher::new_keyed(&self.salts);
        h.update(segment_path(place).as_bytes());
        h.update(&(i as u64).to_le_bytes());
        h.finalize().as_bytes()[..LEAF]
            .try_into()
            .expect("invariant: LEAF bytes")
    }

    /// The seal of this replica's segment at `place` (its path) holding `segment`: `held`
    /// extended by the lines after it, or a new one when `held` is not this key's or does
    /// not vouch for the lines it covers. `None` when `held` already covers every line.
    pub fn seal(
        &self,
        place: &str,
        replica: &str,
        segment: &[u8],
        held: Option<&Seal>,
    ) -> Option<Seal> {
        let lines = lines(segment);
        let key = self.public();
        let mut seal = match held {
            Some(s)
                if s.key == key
                    && s.replica == replica
                    && s.leaves.len() <= lines.len()
                    && s.verifies(place)
                    && lines[..s.leaves.len()]
                        .iter()
                        .enumerate()
                        .all(|(i, l)| s.salts[i] == ZERO || s.vouches(i, l)) =>
            {
                if s.leaves.len() == lines.len() {
                    return None;
                }
                s.clone()
            }
            _ => Seal {
                replica: replica.to_string(),
                key,
                leaves: Vec::new(),
                salts: Vec::new(),
                sig: [0; 64],
            },
        };
        for (i, l) in lines.iter().enumerate().skip(seal.leaves.len()) {
            let salt = self.salt(place, i);
            seal.leaves.push(leaf(&salt, l));
            // A line forgotten before it was sealed keeps no salt: its tombstone is checked as
            // a forget, and nothing of the text it held is left to confirm.
            seal.salts.push(if tombstone(l) { ZERO } else { salt });
        }
        let m = message(place, replica, &key, &seal.leaves);
        seal.sig = self.key.sign(&m).to_bytes();
        Some(seal)
    }
}

/// The seals a sync consults: those held under `root`, and those taken in this sync, which
/// win over the held ones. Keys: each replica's key is the key of the first of its seals this
/// replica holds or took.
pub struct SealBook<'a> {
    root: &'a Path,
    taken: RefCell<BTreeMap<String, Seal>>,
    keys: RefCell<Option<BTreeMap<String, [u8; 32]>>>,
}

impl<'a> SealBook<'a> {
    pub fn new(root: &'a Path) -> SealBook<'a> {
        SealBook {
            root,
            taken: RefCell::default(),
            keys: RefCell::default(),
        }
    }

    /// The seal of the segment or seal at `path`: taken in this sync, else held (a seal that
    /// does not parse or verify is as none).
    pub fn seal(&self, path: &str) -> Option<Seal> {
        let at = seal_path(&segment_path(path));
        if let Some(s) = self.taken.borrow().get(&at) {
            return Some(s.clone());
        }
        let bytes = fsx::read(&self.root.join(&at), fsx::MAX_SEGMENT_FILE)
            .ok()
            .flatten()?;
        Seal::parse(&bytes).ok().filter(|s| s.verifies(&at))
    }

    /// The key this replica trusts for `replica`, if it holds any seal of it.
    pub fn key(&self, replica: &str) -> Option<[u8; 32]> {
        if self.keys.borrow().is_none() {
            *self.keys.borrow_mut() = Some(held_keys(self.root));
        }
        self.keys.borrow().as_ref()?.get(replica).copied()
    }

    /// Records a seal taken in this sync (its key trusted from now on if none was).
    pub fn take(&self, path: &str, seal: Seal) {
        self.key(&seal.replica);
        if let Some(keys) = self.keys.borrow_mut().as_mut() {
            keys.entry(seal.replica.clone()).or_insert(seal.key);
        }
        self.taken.borrow_mut().insert(path.to_string(), seal);
    }
}

/// Withdraws, in the seals of the segments `writes` rewrites, the salt of each line those
/// writes make a tombstone (a forget here or one taken from outside), so no seal keeps what
/// could confirm a forgotten text. The seal's new bytes join `writes` (one transaction).
pub fn withdraw_forgotten(root: &Path, writes: &mut Vec<txn::FileWrite>) {
    let mut add = Vec::new();
    for w in writes.iter() {
        let rel = w.rel.to_string_lossy();
        let (Some(bytes), true) = (
            &w.bytes,
            rel.starts_with("sessions/") && rel.ends_with(".jsonl"),
        ) else {
            continue;
        };
        let at = seal_path(&rel);
        let held = writes
            .iter()
            .find(|x| x.rel.to_string_lossy() == at)
            .and_then(|x| x.bytes.clone())
            .or_else(|| {
                fsx::read(&root.join(&at), fsx::MAX_SEGMENT_FILE)
                    .ok()
                    .flatten()
            });
        if let Some(mut seal) = held.and_then(|b| Seal::parse(&b).ok())
            && seal.withdraw_forgotten(bytes)
        {
            add.push(txn::FileWrite {
                rel: at.into(),
                bytes: Some(seal.to_bytes()),
                hash: None,
            });
        }
    }
    for a in add {
        writes.retain(|x| x.rel != a.rel);
        writes.push(a);
    }
}

/// The seals this replica owes for `segments` (its own) under `root`: each sealed up to its
/// last line (the writes of the seals that change).
pub fn own_seals(
    root: &Path,
    replica: &str,
    signer: &Signer32,
    segments: &[memdir_store::SegmentFile],
) -> Vec<txn::FileWrite> {
    let mut out = Vec::new();
    for seg in segments.iter().filter(|s| s.replica == replica) {
        let rel = seg.rel.to_string_lossy().into_owned();
        let at = seal_path(&rel);
        let Ok(Some(bytes)) = fsx::read(&root.join(&seg.rel), fsx::MAX_SEGMENT_FILE) else {
            continue;
        };
        let held = fsx::read(&root.join(&at), fsx::MAX_SEGMENT_FILE)
            .ok()
            .flatten()
            .and_then(|b| Seal::parse(&b).ok());
        if let Some(seal) = signer.seal(&at, replica, &bytes, held.as_ref()) {
            out.push(txn::FileWrite {
                rel: at.into(),
                bytes: Some(seal.to_bytes()),
                hash: None,
            });
        }
    }
    out
}

/// The seal files of the session directory `session_rel` under `root`, sorted (regular files
/// with a seal's name only).
pub fn seal_files(root: &Path, session_rel: &Path) -> Vec<std::path::PathBuf> {
    let Ok(rd) = std::fs::read_dir(root.join(session_rel)) else {
        return Vec::new();
    };
    let mut out: Vec<_> = rd
        .flatten()
        .filter(|e| fsx::entry_kind(e) == fsx::EntryKind::File)
        .filter(|e| super::gate::file_name_ok(&e.file_name().to_string_lossy(), SUFFIX))
        .map(|e| session_rel.join(e.file_name()))
        .collect();
    out.sort();
    out
}

/// The key of each replica that has a seal under `root` (the first found, in path order).
fn held_keys(root: &Path) -> BTreeMap<String, [u8; 32]> {
    let mut keys = BTreeMap::new();
    let Ok(dirs) = std::fs::read_dir(root.join("sessions")) else {
        return keys;
    };
    let mut dirs: Vec<_> = dirs
        .flatten()
        .filter(|e| fsx::entry_kind(e) == fsx::EntryKind::Dir)
        .filter(|e| decode_component(&e.file_name().to_string_lossy()).is_some())
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<_> = rd
            .flatten()
            .filter(|e| fsx::entry_kind(e) == fsx::EntryKind::File)
            .filter(|e| e.file_name().to_string_lossy().ends_with(SUFFIX))
            .map(|e| e.path())
            .collect();
        files.sort();
        for f in files {
            if let Ok(Some(b)) = fsx::read(&f, fsx::MAX_SEGMENT_FILE)
                && let Ok(s) = Seal::parse(&b)
            {
                keys.entry(s.replica).or_insert(s.key);
            }
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLACE: &str = "sessions/s/peer-aaaa.head";

    fn line(seq: u64, content: &str) -> String {
        format!(
            r#"{{"session_id":"s","replica":"peer-aaaa","seq":{seq},"hlc":"20260101T000000{seq:03}Z-0000","ts":"2026-01-01T00:00:00.{seq:03}Z","project":"","metadata":{{}},"content":"{content}"}}"#
        )
    }

    fn tomb(seq: u64) -> String {
        format!(
            r#"{{"session_id":"s","replica":"peer-aaaa","seq":{seq},"hlc":"20260101T000000{seq:03}Z-0000","ts":"2026-01-01T00:00:00.{seq:03}Z","project":"","metadata":{{"forgotten":"2026-02-01T00:00:00.000Z"}},"content":""}}"#
        )
    }

    fn seg(ls: &[String]) -> Vec<u8> {
        ls.iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn a_seal_vouches_for_its_lines_and_nothing_else() {
        let signer = Signer32::new(&[7; 32]);
        let s = seg(&[line(0, "alpha"), line(1, "beta")]);
        let seal = signer.seal(PLACE, "peer-aaaa", &s, None).unwrap();
        assert!(seal.verifies(PLACE));
        assert_eq!(seal.first_unvouched(&s), None);
        // Round trip through its file.
        assert_eq!(Seal::parse(&seal.to_bytes()).unwrap(), seal);
        // A rewritten line is not vouched for; nor a line past the seal.
        let forged = seg(&[line(0, "alpha"), line(1, "BETA")]);
        assert_eq!(seal.first_unvouched(&forged), Some(1));
        let longer = seg(&[line(0, "alpha"), line(1, "beta"), line(2, "gamma")]);
        assert_eq!(seal.first_unvouched(&longer), Some(2));
        // The seal names its segment: moved beside another, it does not verify.
        assert!(!seal.verifies("sessions/t/peer-aaaa.head"));
        // Another key's leaves do not verify under this key.
        let mut stolen = Signer32::new(&[8; 32])
            .seal(PLACE, "peer-aaaa", &forged, None)
            .unwrap();
        stolen.key = seal.key;
        assert!(!stolen.verifies(PLACE));
    }

    #[test]
    fn sealing_again_extends_and_a_forget_withdraws_the_salt() {
        let signer = Signer32::new(&[7; 32]);
        let one = seg(&[line(0, "alpha")]);
        let first = signer.seal(PLACE, "peer-aaaa", &one, None).unwrap();
        assert!(
            signer
                .seal(PLACE, "peer-aaaa", &one, Some(&first))
                .is_none()
        );
        let two = seg(&[line(0, "alpha"), line(1, "beta")]);
        let second = signer.seal(PLACE, "peer-aaaa", &two, Some(&first)).unwrap();
        assert_eq!(second.leaves[0], first.leaves[0]);
        assert_eq!(first.merge(&second), Some(second.clone()));
        // A forget: the tombstone needs no salt, and the forgotten line's salt goes.
        let forgotten = seg(&[tomb(0), line(1, "beta")]);
        let mut after = second.clone();
        assert!(after.withdraw_forgotten(&forgotten));
        assert_eq!(after.salts[0], ZERO);
        assert!(after.verifies(PLACE), "salts are not signed");
        assert_eq!(after.first_unvouched(&forgotten), None);
        // The live text can no longer be checked against its leaf: nothing confirms a guess.
        assert!(!after.vouches(0, line(0, "alpha").as_bytes()));
        // Merging keeps the withdrawal whichever side had it.
        assert_eq!(second.merge(&after).unwrap().salts[0], ZERO);
        // Sealing after the forget keeps the seal (its withdrawn salt included).
        let three = seg(&[tomb(0), line(1, "beta"), line(2, "gamma")]);
        let third = signer
            .seal(PLACE, "peer-aaaa", &three, Some(&after))
            .unwrap();
        assert_eq!(third.leaves[..2], second.leaves[..]);
        assert_eq!(third.salts[0], ZERO);
    }

    #[test]
    fn seals_that_disagree_do_not_merge() {
        let a = Signer32::new(&[7; 32]);
        let s1 = a
            .seal(PLACE, "peer-aaaa", &seg(&[line(0, "alpha")]), None)
            .unwrap();
        let s2 = a
            .seal(PLACE, "peer-aaaa", &seg(&[line(0, "other")]), None)
            .unwrap();
        assert_eq!(s1.merge(&s2), None);
        let b = Signer32::new(&[9; 32])
            .seal(PLACE, "peer-aaaa", &seg(&[line(0, "alpha")]), None)
            .unwrap();
        assert_eq!(s1.merge(&b), None);
    }

    #[test]
    fn malformed_seals_are_refused_with_a_reason() {
        for (bytes, says) in [
            (&b"{}"[..], "not a seal"),
            (br#"{"seal":2,"replica":"r","key":"","leaves":"","salts":"","sig":""}"#, "format 2"),
            (br#"{"seal":1,"replica":"r","key":"zz","leaves":"","salts":"","sig":""}"#, "key"),
            (br#"{"seal":1,"replica":"r","key":"0000000000000000000000000000000000000000000000000000000000000000","leaves":"00","salts":"00","sig":"00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"}"#, "one per line"),
        ] {
            let e = Seal::parse(bytes).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }
}
