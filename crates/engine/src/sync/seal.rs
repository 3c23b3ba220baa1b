//! Segment seals: each replica signs the lines it wrote, so another replica can tell them from
//! a remote's rewrite even for a segment it has never held.
//!
//! A segment `sessions/<id>/<replica>[.<n>].jsonl` is appended to by its own replica only
//! ([`super::gate`]). Before a sync sends anything, that replica writes beside it the seal
//! `sessions/<id>/<replica>[.<n>].head`: one JSON line holding its ed25519 public key, a leaf
//! per line and a signature over the leaves. A line's leaf binds its identity (session,
//! replica, `seq`, `hlc`, `ts`) to an *inner* hash of a per-line salt and the line; the salts
//! come from the replica's secret, so only it can make leaves. Beside the signed leaves the
//! seal carries, unsigned, each line's inner hash and salt (its *proof*): a live line is
//! checked with both, a tombstone with the inner hash alone (so it is the tombstone of that
//! very line). A forget withdraws the line's salt with its text: the inner hash left confirms
//! no guess of the forgotten text.
//!
//! Proofs are not signed, so no proof from outside is believed on its own: a sync gathers
//! every copy of a seal it meets (the one held, those it takes), a line is vouched for when any
//! of them proves it against the signed leaf, and the seal written ([`settle`]) keeps for each
//! line the proof that proves the line this replica ends up holding.
//!
//! What a replica takes from outside (the gate's rules, docs/design/replication.md):
//! - a seal only if it verifies under the key this replica holds for that replica (the key of
//!   any seal of it already held; the first seen is trusted), and only if its leaves agree with
//!   the seal held (the same leaves, then perhaps more);
//! - a line of another replica's segment (live or tombstone) only if a seal vouches for it; a
//!   line past the seal's leaves is not sealed yet and waits for the next sync;
//! - a copy that replaces lines it holds and no seal vouches for (taken before seals) only
//!   line by line where the seal vouches for the new one, keeping every line it vouches for.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use memdir_store::model::decode_component;
use memdir_store::{fsx, txn};

/// The file suffix of a seal (beside its segment's `.jsonl`).
pub const SUFFIX: &str = ".head";
/// Bytes of a leaf, an inner hash and a salt.
const LEAF: usize = 12;
const ZERO: [u8; LEAF] = [0; LEAF];

type Bytes12 = [u8; LEAF];

/// What checks one line against its leaf (not signed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proof {
    /// BLAKE3 of the line's salt and the line.
    pub inner: Bytes12,
    /// The line's salt; zero once the line is forgotten.
    pub salt: Bytes12,
}

/// A segment's seal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seal {
    pub replica: String,
    pub key: [u8; 32],
    /// One per sealed line (signed).
    pub leaves: Vec<Bytes12>,
    /// One per sealed line (not signed).
    pub proofs: Vec<Proof>,
    pub sig: [u8; 64],
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    seal: u32,
    replica: String,
    key: String,
    leaves: String,
    inners: String,
    salts: String,
    sig: String,
}

/// Bytes as lowercase hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Bytes of a hex string (`None` if it is not one).
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// A 32-byte key or secret from its hex (`None` if it is not one).
pub fn key_from_hex(s: &str) -> Option<[u8; 32]> {
    unhex(s).and_then(|b| b.try_into().ok())
}

fn chunks(b: &[u8]) -> Vec<Bytes12> {
    b.chunks_exact(LEAF)
        .map(|c| c.try_into().expect("invariant: chunks_exact"))
        .collect()
}

fn hash12(parts: &[&[u8]]) -> Bytes12 {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().as_bytes()[..LEAF]
        .try_into()
        .expect("invariant: LEAF bytes")
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
fn message(place: &str, replica: &str, key: &[u8; 32], leaves: &[Bytes12]) -> [u8; 32] {
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

/// A chunk line as a seal sees it: its identity and whether it is a tombstone.
struct Line {
    identity: Vec<u8>,
    tombstone: bool,
}

/// The fields of a chunk line a seal reads, borrowed where the JSON has no escapes; the rest
/// is skipped unparsed.
#[derive(Deserialize)]
struct Fields<'a> {
    #[serde(borrow)]
    session_id: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    replica: std::borrow::Cow<'a, str>,
    seq: u64,
    #[serde(borrow)]
    hlc: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    ts: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    content: std::borrow::Cow<'a, str>,
    #[serde(default)]
    metadata: Meta,
}

#[derive(Default, Deserialize)]
struct Meta {
    #[serde(default)]
    forgotten: Present,
}

/// Whether a key is there at all (with any value, `null` included), as `is_tombstone` asks.
#[derive(Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Present(true))
    }
}

impl Line {
    fn of(line: &[u8]) -> Option<Line> {
        let f: Fields = serde_json::from_slice(line).ok()?;
        let mut identity = Vec::with_capacity(64);
        for part in [&f.session_id, &f.replica] {
            identity.extend_from_slice(part.as_bytes());
            identity.push(0);
        }
        identity.extend_from_slice(f.seq.to_string().as_bytes());
        identity.push(0);
        identity.extend_from_slice(f.hlc.as_bytes());
        identity.push(0);
        identity.extend_from_slice(f.ts.as_bytes());
        Some(Line {
            identity,
            tombstone: f.content.is_empty() && f.metadata.forgotten.0,
        })
    }
}

/// Whether a line may be a tombstone (a cheap look before parsing it).
fn maybe_tombstone(line: &[u8]) -> bool {
    line.windows(11).any(|w| w == b"\"forgotten\"")
}

fn inner_of(salt: &Bytes12, line: &[u8]) -> Bytes12 {
    hash12(&[b"memdir seal inner\0", salt, line])
}

fn leaf_of(identity: &[u8], inner: &Bytes12) -> Bytes12 {
    hash12(&[b"memdir seal leaf\0", identity, b"\0", inner])
}

impl Proof {
    /// Whether this proof shows `line` (without its newline) is the line of `leaf`: a live
    /// line by its salt, a tombstone by its identity.
    fn proves(&self, leaf: &Bytes12, line: &[u8]) -> bool {
        let Some(l) = Line::of(line) else {
            return false;
        };
        if leaf_of(&l.identity, &self.inner) != *leaf {
            return false;
        }
        l.tombstone || (self.salt != ZERO && inner_of(&self.salt, line) == self.inner)
    }
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
    Line::of(line).is_some_and(|l| l.tombstone)
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
        let inners = unhex(&w.inners).ok_or("inner hashes are not hex")?;
        let salts = unhex(&w.salts).ok_or("salts are not hex")?;
        if !leaves.len().is_multiple_of(LEAF)
            || salts.len() != leaves.len()
            || inners.len() != leaves.len()
        {
            return Err("leaves, inner hashes and salts are not one per line".into());
        }
        Ok(Seal {
            replica: w.replica,
            key,
            leaves: chunks(&leaves),
            proofs: chunks(&inners)
                .into_iter()
                .zip(chunks(&salts))
                .map(|(inner, salt)| Proof { inner, salt })
                .collect(),
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
            inners: self.proofs_hex(|p| p.inner),
            salts: self.proofs_hex(|p| p.salt),
            sig: hex(&self.sig),
        };
        let mut b = serde_json::to_vec(&w).expect("invariant: a seal serializes");
        b.push(b'\n');
        b
    }

    /// One field of every proof, concatenated as hex.
    fn proofs_hex(&self, field: fn(&Proof) -> Bytes12) -> String {
        hex(&self.proofs.iter().map(field).collect::<Vec<_>>().concat())
    }

    /// Whether the signature is the key's over these leaves, for the segment at `place`.
    pub fn verifies(&self, place: &str) -> bool {
        let Ok(key) = VerifyingKey::from_bytes(&self.key) else {
            return false;
        };
        let m = message(place, &self.replica, &self.key, &self.leaves);
        key.verify(&m, &Signature::from_bytes(&self.sig)).is_ok()
    }

    /// Whether line `i` (without its newline) is the sealed one: a live line by its salt, a
    /// tombstone as the tombstone of the sealed line. A line past the leaves is not sealed.
    pub fn vouches(&self, i: usize, line: &[u8]) -> bool {
        match (self.leaves.get(i), self.proofs.get(i)) {
            (Some(l), Some(p)) => p.proves(l, line),
            _ => false,
        }
    }

    /// The first line of `segment` the seal does not vouch for, if any.
    pub fn first_unvouched(&self, segment: &[u8]) -> Option<usize> {
        lines(segment)
            .iter()
            .enumerate()
            .find(|(i, l)| !self.vouches(*i, l))
            .map(|(i, _)| i)
    }

    /// Whether `segment` holds a line within the seal that it does not vouch for: a copy
    /// that is not the one its replica wrote (lines past the seal are not sealed yet).
    pub fn contradicts(&self, segment: &[u8]) -> bool {
        lines(segment)
            .iter()
            .take(self.leaves.len())
            .enumerate()
            .any(|(i, l)| !self.vouches(i, l))
    }

    /// Whether both are seals of one segment by one key whose leaves agree (one's leaves
    /// begin the other's).
    pub fn agrees(&self, other: &Seal) -> bool {
        let n = self.leaves.len().min(other.leaves.len());
        self.key == other.key
            && self.replica == other.replica
            && self.leaves[..n] == other.leaves[..n]
    }

    /// This seal and `other` (both verified, agreeing) as one: the longer leaves, with this
    /// seal's proofs where it has them. `None` when they do not agree.
    pub fn merge(&self, other: &Seal) -> Option<Seal> {
        if !self.agrees(other) {
            return None;
        }
        let mut out = if other.leaves.len() > self.leaves.len() {
            other.clone()
        } else {
            self.clone()
        };
        out.proofs[..self.proofs.len()].copy_from_slice(&self.proofs);
        Some(out)
    }

    /// This seal with each line's proof taken from the first of `seals` that proves the line
    /// `segment` holds (and a tombstone's salt withdrawn); a line not held, or proved by none,
    /// keeps the proof it has. `true` if a proof changed.
    fn settle(&mut self, seals: &[Seal], segment: &[u8]) -> bool {
        let mut changed = false;
        for (i, line) in lines(segment)
            .into_iter()
            .enumerate()
            .take(self.leaves.len())
        {
            let leaf = self.leaves[i];
            // Every copy holds this proof and the line is live: nothing to pick or withdraw.
            let agreed = seals.iter().all(|s| {
                s.leaves.get(i) != Some(&leaf) || s.proofs.get(i) == Some(&self.proofs[i])
            });
            if agreed && !maybe_tombstone(line) {
                continue;
            }
            let Some(mut p) = std::iter::once(&*self)
                .chain(seals)
                .filter_map(|s| s.proofs.get(i).filter(|_| s.leaves.get(i) == Some(&leaf)))
                .find(|p| p.proves(&leaf, line))
                .copied()
            else {
                continue;
            };
            if tombstone(line) {
                p.salt = ZERO;
            }
            if self.proofs[i] != p {
                self.proofs[i] = p;
                changed = true;
            }
        }
        changed
    }
}

/// Characters of a key id.
const KEY_ID: usize = 16;

/// The key id a replica id minted with its key ends in: 16 base32 characters (80 bits) of
/// BLAKE3 of the public key.
pub fn key_id(key: &[u8; 32]) -> String {
    const B32: &[u8] = b"abcdefghijklmnopqrstuvwxyz234567";
    let h = blake3::hash(&[b"memdir replica key id\0".as_slice(), key].concat());
    let bits = u128::from_le_bytes(h.as_bytes()[..16].try_into().expect("16 bytes"));
    (0..KEY_ID)
        .map(|i| B32[((bits >> (5 * i)) & 31) as usize] as char)
        .collect()
}

/// The key id `replica` names, if it was minted with its key (`<slug>-<16 base32>`); a
/// replica id from before keys names none, and its key is the first one seen.
pub fn named_key_id(replica: &str) -> Option<&str> {
    let (_, tail) = replica.rsplit_once('-')?;
    (tail.len() == KEY_ID
        && tail
            .bytes()
            .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b)))
    .then_some(tail)
}

/// A replica's signing key, from the 32-byte secret in `.memdir/replica`.
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

    fn salt(&self, place: &str, i: usize) -> Bytes12 {
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
                        .all(|(i, l)| s.vouches(i, l)) =>
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
                proofs: Vec::new(),
                sig: [0; 64],
            },
        };
        for (i, l) in lines.iter().enumerate().skip(seal.leaves.len()) {
            let salt = self.salt(place, i);
            let inner = inner_of(&salt, l);
            let line = Line::of(l);
            let identity = line.as_ref().map_or(&[][..], |x| &x.identity);
            seal.leaves.push(leaf_of(identity, &inner));
            // A line forgotten before it was sealed keeps no salt: nothing of the text it held
            // is left to confirm.
            let gone = line.is_some_and(|x| x.tombstone);
            seal.proofs.push(Proof {
                inner,
                salt: if gone { ZERO } else { salt },
            });
        }
        let m = message(place, replica, &key, &seal.leaves);
        seal.sig = self.key.sign(&m).to_bytes();
        Some(seal)
    }
}

/// The seals a sync consults: every copy of each seal it met (the one held under `root`, and
/// those taken in this sync). Keys: each replica's key is the key of the first of its seals
/// this replica holds or took.
pub struct SealBook<'a> {
    root: &'a Path,
    /// The seal files held, read once each (a sync writes none until it commits).
    held: RefCell<BTreeMap<String, Option<Seal>>>,
    taken: RefCell<BTreeMap<String, Vec<Seal>>>,
    keys: RefCell<Option<BTreeMap<String, [u8; 32]>>>,
}

/// A seal file under `root` that parses and verifies.
fn held(root: &Path, at: &str) -> Option<Seal> {
    let bytes = fsx::read(&root.join(at), fsx::MAX_SEGMENT_FILE)
        .ok()
        .flatten()?;
    Seal::parse(&bytes).ok().filter(|s| s.verifies(at))
}

impl<'a> SealBook<'a> {
    pub fn new(root: &'a Path) -> SealBook<'a> {
        SealBook {
            root,
            held: RefCell::default(),
            taken: RefCell::default(),
            keys: RefCell::default(),
        }
    }

    /// Every copy of the seal of the segment or seal at `path` met so far: the one held, then
    /// those taken in this sync.
    pub fn seals(&self, path: &str) -> Vec<Seal> {
        let at = seal_path(&segment_path(path));
        let mut out: Vec<Seal> = self
            .held
            .borrow_mut()
            .entry(at.clone())
            .or_insert_with(|| held(self.root, &at))
            .iter()
            .cloned()
            .collect();
        if let Some(t) = self.taken.borrow().get(&at) {
            out.extend(t.iter().cloned());
        }
        out
    }

    /// The key this replica trusts for `replica`, an id from before keys, if it holds any
    /// seal of it (the held seals are scanned once, and only when such an id comes up). An id
    /// that names its key has none here: the gate checks the key against the id.
    pub fn key(&self, replica: &str) -> Option<[u8; 32]> {
        if named_key_id(replica).is_some() {
            return None;
        }
        if self.keys.borrow().is_none() {
            *self.keys.borrow_mut() = Some(held_keys(self.root));
        }
        self.keys.borrow().as_ref()?.get(replica).copied()
    }

    /// Records a seal taken in this sync (its key trusted from now on if none was).
    pub fn take(&self, path: &str, seal: Seal) {
        if self.key(&seal.replica).is_none()
            && let Some(keys) = self.keys.borrow_mut().as_mut()
        {
            keys.entry(seal.replica.clone()).or_insert(seal.key);
        }
        let at = seal_path(&segment_path(path));
        self.taken.borrow_mut().entry(at).or_default().push(seal);
    }
}

/// Whether any of `seals` vouches for line `i`.
pub fn vouched(seals: &[Seal], i: usize, line: &[u8]) -> bool {
    seals.iter().any(|s| s.vouches(i, line))
}

/// The most lines any of `seals` covers.
pub fn sealed_lines(seals: &[Seal]) -> usize {
    seals.iter().map(|s| s.leaves.len()).max().unwrap_or(0)
}

/// Settles the seals of the segments `writes` changes (and the seals it writes): each line's
/// proof becomes one that proves the line the segment now holds, taken from any copy of the
/// seal this replica met (`book`, the held file, the copy in `writes`), and a tombstone's salt
/// is withdrawn, so no seal keeps what could confirm a forgotten text and a proof a remote
/// tampered with never outlives a sync that brings the line. The seals' new bytes join
/// `writes` (one transaction).
pub fn settle(root: &Path, book: Option<&SealBook>, writes: &mut Vec<txn::FileWrite>) {
    let places: std::collections::BTreeSet<String> = writes
        .iter()
        .map(|w| w.rel.to_string_lossy().into_owned())
        .filter(|r| r.starts_with("sessions/") && (r.ends_with(".jsonl") || r.ends_with(SUFFIX)))
        .map(|r| seal_path(&segment_path(&r)))
        .collect();
    for at in places {
        let seg = segment_path(&at);
        let written = |rel: &str| {
            writes
                .iter()
                .find(|w| w.rel.to_string_lossy() == rel)
                .map(|w| w.bytes.clone())
        };
        let disk = |rel: &str| {
            fsx::read(&root.join(rel), fsx::MAX_SEGMENT_FILE)
                .ok()
                .flatten()
        };
        let Some(segment) = written(&seg).unwrap_or_else(|| disk(&seg)) else {
            continue;
        };
        let current = written(&at).unwrap_or_else(|| disk(&at));
        let Some(mut seal) = current.as_deref().and_then(|b| Seal::parse(b).ok()) else {
            continue;
        };
        let mut others: Vec<Seal> = match book {
            Some(b) => b.seals(&at),
            None => held(root, &at).into_iter().collect(),
        };
        others.retain(|s| s.agrees(&seal));
        if seal.settle(&others, &segment) {
            let bytes = seal.to_bytes();
            writes.retain(|w| w.rel.to_string_lossy() != at);
            writes.push(txn::FileWrite {
                rel: at.into(),
                bytes: Some(bytes),
                hash: None,
            });
        }
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
        // A rewritten line is not vouched for; nor a line past the seal, live or tombstone.
        let forged = seg(&[line(0, "alpha"), line(1, "BETA")]);
        assert_eq!(seal.first_unvouched(&forged), Some(1));
        let longer = seg(&[line(0, "alpha"), line(1, "beta"), line(2, "gamma")]);
        assert_eq!(seal.first_unvouched(&longer), Some(2));
        let forged_forget = seg(&[line(0, "alpha"), line(1, "beta"), tomb(2)]);
        assert_eq!(seal.first_unvouched(&forged_forget), Some(2));
        // A tombstone is vouched for only as the tombstone of the sealed line.
        assert!(seal.vouches(1, tomb(1).as_bytes()));
        assert!(
            !seal.vouches(0, tomb(1).as_bytes()),
            "another line's identity"
        );
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
    fn proofs_from_outside_prove_nothing_they_cannot_show() {
        let signer = Signer32::new(&[7; 32]);
        let s = seg(&[line(0, "alpha"), line(1, "beta")]);
        let seal = signer.seal(PLACE, "peer-aaaa", &s, None).unwrap();
        // Zeroed or made-up salts and inner hashes: still a valid signature, but they prove
        // no line, and settling against the held seal keeps the proofs that do.
        let mut tampered = seal.clone();
        tampered.proofs[0].salt = ZERO;
        tampered.proofs[1].inner = [9; LEAF];
        assert!(tampered.verifies(PLACE), "proofs are not signed");
        assert!(!tampered.vouches(0, line(0, "alpha").as_bytes()));
        assert!(!tampered.vouches(1, tomb(1).as_bytes()));
        assert!(vouched(
            &[tampered.clone(), seal.clone()],
            0,
            line(0, "alpha").as_bytes()
        ));
        let mut settled = tampered.clone();
        assert!(settled.settle(std::slice::from_ref(&seal), &s));
        assert_eq!(settled, seal);
        // Nor does a seal's own proof of another line: each is checked against its own leaf.
        let mut swapped = seal.clone();
        swapped.proofs.swap(0, 1);
        assert_eq!(swapped.first_unvouched(&s), Some(0));
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
        // A forget: settling withdraws the forgotten line's salt; its tombstone stays vouched.
        let forgotten = seg(&[tomb(0), line(1, "beta")]);
        let mut after = second.clone();
        assert!(after.settle(&[], &forgotten));
        assert_eq!(after.proofs[0].salt, ZERO);
        assert!(after.verifies(PLACE), "proofs are not signed");
        assert_eq!(after.first_unvouched(&forgotten), None);
        // The live text can no longer be checked: nothing confirms a guess.
        assert!(!after.vouches(0, line(0, "alpha").as_bytes()));
        // A replica that held the live line settles with the forgetter's seal the same way.
        let mut elsewhere = second.clone();
        elsewhere.settle(std::slice::from_ref(&after), &forgotten);
        assert_eq!(elsewhere, after);
        // Sealing after the forget keeps the seal.
        let three = seg(&[tomb(0), line(1, "beta"), line(2, "gamma")]);
        let third = signer
            .seal(PLACE, "peer-aaaa", &three, Some(&after))
            .unwrap();
        assert_eq!(third.leaves[..2], second.leaves[..]);
        assert_eq!(third.proofs[0].salt, ZERO);
        // A line forgotten before it was ever sealed is sealed as its tombstone, saltless.
        let fresh = signer.seal(PLACE, "peer-aaaa", &three, None).unwrap();
        assert_eq!(fresh.proofs[0].salt, ZERO);
        assert_eq!(fresh.first_unvouched(&three), None);
    }

    #[test]
    fn a_replica_id_minted_with_its_key_names_that_key_only() {
        let key = Signer32::new(&[7; 32]).public();
        let other = Signer32::new(&[8; 32]).public();
        let id = format!("laptop-{}", key_id(&key));
        assert_eq!(key_id(&key).len(), 16);
        assert_eq!(named_key_id(&id), Some(key_id(&key).as_str()));
        assert_ne!(key_id(&key), key_id(&other));
        // Ids from before keys name none (their key is the first one seen).
        assert_eq!(named_key_id("laptop-7f3k"), None);
        assert_eq!(named_key_id("laptop"), None);
        assert_eq!(named_key_id("laptop-ABCDEFGHIJKLMNOP"), None);
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
        let zeros = |n: usize| "0".repeat(n);
        let one_per_line = format!(
            r#"{{"seal":1,"replica":"r","key":"{}","leaves":"00","inners":"","salts":"00","sig":"{}"}}"#,
            zeros(64),
            zeros(128)
        );
        for (bytes, says) in [
            (&b"{}"[..], "not a seal"),
            (br#"{"seal":2,"replica":"r","key":"","leaves":"","inners":"","salts":"","sig":""}"#, "format 2"),
            (br#"{"seal":1,"replica":"r","key":"zz","leaves":"","inners":"","salts":"","sig":""}"#, "key"),
            (one_per_line.as_bytes(), "one per line"),
        ] {
            let e = Seal::parse(bytes).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }
}
