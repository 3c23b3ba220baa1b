//! Hybrid search's fusion of the BM25 list with the nearest vectors, and the dense lists a
//! caller brings.

use tantivy::DocAddress;

#[cfg(doc)]
use super::Filters;

/// The nearest documents by vector, each list best first, already filtered (the caller
/// applies [`Filters`] to its vectors the way the query clauses apply them to the index).
#[derive(Clone, Debug, Default)]
pub struct Dense {
    pub chunks: Vec<(f32, DocAddress)>,
    pub categories: Vec<(f32, DocAddress)>,
}

/// How many hits of each list enter a hybrid fusion.
pub const FUSION_DEPTH: usize = 50;
/// Weight of the dense score in a hybrid fusion (BM25 gets the rest). On the dev set
/// (bench/devset, MiniLM, short turns embedded after the turn before them) R@5 / R@10 were
/// 0.490 / 0.605 at 0.4, 0.518 / 0.614 at 0.5 and 0.512 / 0.600 at 0.6, where adversarial
/// questions, whose names the dense side does not weigh, fell.
pub const DENSE_WEIGHT: f32 = 0.5;

/// Weighted fusion of two ranked lists: each list's scores are min-max normalised to 0..=1
/// (a list of one scores 1), a key missing from a list scores 0 there, and the fused score is
/// `dense_weight × dense + (1 - dense_weight) × bm25`. Returns `(key, fused, (bm25, dense))`
/// best first, ties in key order, with the normalised parts. On chat recall this beat
/// reciprocal rank fusion, which let weak dense hits push good BM25 hits out (see
/// bench/README.md).
pub fn fuse<K: Ord + Clone>(
    bm25: &[(K, f32)],
    dense: &[(K, f32)],
    dense_weight: f32,
) -> Vec<(K, f32, (f32, f32))> {
    fn norm<K: Ord + Clone>(l: &[(K, f32)]) -> std::collections::BTreeMap<K, f32> {
        let lo = l.iter().map(|x| x.1).fold(f32::INFINITY, f32::min);
        let hi = l.iter().map(|x| x.1).fold(f32::NEG_INFINITY, f32::max);
        l.iter()
            .map(|(k, s)| {
                let n = if hi > lo { (s - lo) / (hi - lo) } else { 1.0 };
                (k.clone(), n)
            })
            .collect()
    }
    let (b, d) = (norm(bm25), norm(dense));
    let mut keys: Vec<K> = b.keys().chain(d.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<(K, f32, (f32, f32))> = keys
        .into_iter()
        .map(|k| {
            let (bk, dk) = (
                b.get(&k).copied().unwrap_or(0.0),
                d.get(&k).copied().unwrap_or(0.0),
            );
            (k, dense_weight * dk + (1.0 - dense_weight) * bk, (bk, dk))
        })
        .collect();
    out.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_normalises_each_list_and_weighs_dense_at_four_tenths() {
        let bm25 = [("a", 10.0), ("b", 5.0), ("c", 0.0)];
        let dense = [("c", 0.9), ("d", 0.5), ("b", 0.1)];
        let f = fuse(&bm25, &dense, 0.4);
        let get = |k| f.iter().find(|x| x.0 == k).unwrap().1;
        assert!((get("a") - 0.6).abs() < 1e-6);
        assert!((get("b") - 0.3).abs() < 1e-6); // 0.6 × 0.5 + 0.4 × 0
        assert!((get("c") - 0.4).abs() < 1e-6);
        assert!((get("d") - 0.2).abs() < 1e-6); // 0.4 × 0.5
        assert_eq!(
            f.iter().map(|x| x.0).collect::<Vec<_>>(),
            ["a", "c", "b", "d"]
        );
        // One list empty: the other alone decides, normalised.
        assert_eq!(fuse(&bm25, &[], 0.4)[0], ("a", 0.6, (1.0, 0.0)));
        // A list of one scores 1.
        assert_eq!(
            fuse::<&str>(&[], &[("x", 0.2)], 0.4),
            vec![("x", 0.4, (0.0, 1.0))]
        );
    }
}
