//! The content hash (BLAKE3 of a file's bytes) of bytes that begin like bytes hashed before,
//! computed again only past what they share.
//!
//! BLAKE3 hashes a tree whose leaves are 1 KiB chunks; the chaining value of a complete
//! subtree depends only on its bytes and its offset. A merge into a large category changes the
//! file from the first changed key on, so the complete 64 KiB subtrees before that point keep
//! their chaining values: [`hash`] takes those from the previous file's [`Leaves`] and hashes
//! the rest. The result is exactly `blake3::hash` of the bytes (tested against it).

use blake3::hazmat::{
    ChainingValue, HasherExt, Mode, left_subtree_len, merge_subtrees_non_root, merge_subtrees_root,
};

/// The size of the subtrees whose chaining values are kept: a power of two, at least 16 chunks
/// so that each is hashed with SIMD at full width.
pub const LEAF: usize = 64 * 1024;

/// The chaining values of the complete [`LEAF`]-sized subtrees of some bytes, in order.
#[derive(Clone, Debug, Default)]
pub struct Leaves(Vec<ChainingValue>);

/// BLAKE3 of `bytes` (hex, as [`crate::model::content_hash`]) and the chaining values of its
/// leaves. `reuse`: the leaves of earlier bytes and how many leading bytes those share with
/// `bytes`; every leaf that lies wholly within the shared bytes is taken from there.
pub fn hash(bytes: &[u8], reuse: Option<(&Leaves, usize)>) -> (String, Leaves) {
    if bytes.len() <= LEAF {
        return (blake3::hash(bytes).to_hex().to_string(), Leaves::default());
    }
    let (old, shared): (&[ChainingValue], usize) = match reuse {
        Some((l, n)) => (&l.0, n.min(bytes.len())),
        None => (&[], 0),
    };
    let mut t = Tree {
        bytes,
        old,
        shared,
        new: vec![[0; 32]; bytes.len() / LEAF],
    };
    let left = left_subtree_len(bytes.len() as u64) as usize;
    let l = t.cv(0, left);
    let r = t.cv(left, bytes.len() - left);
    let root = merge_subtrees_root(&l, &r, Mode::Hash);
    (root.to_hex().to_string(), Leaves(t.new))
}

struct Tree<'a> {
    bytes: &'a [u8],
    old: &'a [ChainingValue],
    shared: usize,
    new: Vec<ChainingValue>,
}

impl Tree<'_> {
    /// The chaining value of the subtree of `len` bytes at `offset` (a multiple of `LEAF`, as
    /// every subtree boundary above the leaves is).
    fn cv(&mut self, offset: usize, len: usize) -> ChainingValue {
        if len == LEAF {
            let i = offset / LEAF;
            let cv = match self.old.get(i) {
                Some(cv) if offset + LEAF <= self.shared => *cv,
                _ => self.leaf(offset, len),
            };
            self.new[i] = cv;
            return cv;
        }
        if len < LEAF {
            // The short last subtree.
            return self.leaf(offset, len);
        }
        let left = left_subtree_len(len as u64) as usize;
        let l = self.cv(offset, left);
        let r = self.cv(offset + left, len - left);
        merge_subtrees_non_root(&l, &r, Mode::Hash)
    }

    fn leaf(&self, offset: usize, len: usize) -> ChainingValue {
        blake3::Hasher::new()
            .set_input_offset(offset as u64)
            .update(&self.bytes[offset..offset + len])
            .finalize_non_root()
    }
}

/// How many leading bytes `a` and `b` share.
pub fn shared_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut at = 0;
    // Whole blocks compare as one `memcmp`; the first block that differs is searched byte by
    // byte.
    const BLOCK: usize = 4096;
    while at + BLOCK <= n && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    at + a[at..n]
        .iter()
        .zip(&b[at..n])
        .position(|(x, y)| x != y)
        .unwrap_or(n - at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn the_hash_is_blake3_with_or_without_reused_leaves() {
        let lens = [
            0,
            1,
            1024,
            LEAF - 1,
            LEAF,
            LEAF + 1,
            2 * LEAF,
            2 * LEAF + 5,
            3 * LEAF + 1000,
            765_432,
            1 << 20,
        ];
        for (i, &len) in lens.iter().enumerate() {
            let a = bytes(len, i as u64);
            let (h, leaves) = hash(&a, None);
            assert_eq!(h, blake3::hash(&a).to_hex().to_string(), "len {len}");
            assert_eq!(leaves.0.len(), if len <= LEAF { 0 } else { len / LEAF });
            // The same bytes again, every leaf reused.
            assert_eq!(hash(&a, Some((&leaves, len))).0, h);
            // Changed from some point on, longer or shorter: reused before it only.
            for (cut, grow) in [
                (0usize, 10usize),
                (len / 2, 0),
                (len / 3, 3000),
                (len.saturating_sub(1), 1),
            ] {
                let mut b = a[..cut].to_vec();
                b.extend(bytes(len - cut + grow, 99 + i as u64));
                if len > 0 && cut < len && b[cut] == a[cut] {
                    b[cut] ^= 1;
                }
                let shared = shared_prefix(&a, &b);
                assert_eq!(shared, cut);
                assert_eq!(
                    hash(&b, Some((&leaves, shared))).0,
                    blake3::hash(&b).to_hex().to_string(),
                    "len {len} cut {cut} grow {grow}"
                );
            }
        }
    }

    #[test]
    fn shared_prefix_finds_the_first_difference() {
        let a = bytes(10_000, 1);
        let mut b = a.clone();
        assert_eq!(shared_prefix(&a, &b), 10_000);
        b[8_200] ^= 1;
        assert_eq!(shared_prefix(&a, &b), 8_200);
        assert_eq!(shared_prefix(&a, &a[..5_000]), 5_000);
        assert_eq!(shared_prefix(&a, &[]), 0);
    }
}
