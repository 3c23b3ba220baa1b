//! Token budgets (`max_tokens`): an answer cut to what an agent can afford.
//!
//! Tokens are estimated as characters of the answer's JSON divided by four (the estimate the
//! benchmark reports beside a BPE-like count; English prose runs about four characters to a
//! token). A search answer drops the context lines farthest from their hit, last hit first, then
//! whole hits from the end; the best hit always stays, whole or cut with `…`. A fetched page ends
//! early (its `next_position` says where to go on); its first chunk always stays. A context
//! read leaves out categories from the end of the requested list, then the largest keys of the
//! first. Each answer says what it left out.

use serde::Serialize;

use crate::search::CUT_MARK;
use memdir_api::error::{Error, Result};
use memdir_api::{ContextResponse, FetchResponse, Omitted, SearchHit, SearchResponse};

/// Smallest budget accepted: below it not even the best hit's place fits.
pub const MIN_TOKENS: usize = 50;

/// Estimated tokens of a value's JSON.
pub fn tokens<T: Serialize>(v: &T) -> usize {
    serde_json::to_string(v).map_or(0, |s| s.chars().count().div_ceil(4))
}

/// Checks a `max_tokens` argument.
pub fn check(max: Option<usize>) -> Result<()> {
    match max {
        Some(m) if m < MIN_TOKENS => Err(Error::invalid(
            "max_tokens",
            format!("max_tokens must be at least {MIN_TOKENS}; got {m}"),
        )),
        _ => Ok(()),
    }
}

/// Cuts `text` to about `chars` characters, with the cut mark.
fn cut(text: &mut String, chars: usize) {
    if text.chars().count() > chars {
        let mut t: String = text.chars().take(chars.saturating_sub(1)).collect();
        t.push(CUT_MARK);
        *text = t;
    }
}

/// Fits a search answer into `max` tokens.
pub fn fit_search(resp: &mut SearchResponse, max: usize) {
    let mut omitted = Omitted {
        max_tokens: max,
        ..Omitted::default()
    };
    let over = |r: &SearchResponse, o: &Omitted| {
        let mut probe = r.clone();
        probe.omitted = Some(o.clone());
        tokens(&probe) > max
    };
    if !over(resp, &omitted) {
        return;
    }
    // Context lines, farthest from their hit first, last hit first.
    for i in (0..resp.results.len()).rev() {
        while let SearchHit::Chunk {
            context, position, ..
        } = &mut resp.results[i]
        {
            let Some(far) = context
                .iter()
                .enumerate()
                .max_by_key(|(_, c)| (c.position.abs_diff(*position), c.position))
                .map(|(j, _)| j)
            else {
                break;
            };
            context.remove(far);
            omitted.context_lines += 1;
            if !over(resp, &omitted) {
                resp.omitted = Some(omitted);
                return;
            }
        }
    }
    // Whole hits from the end; the best stays.
    while resp.results.len() > 1 && over(resp, &omitted) {
        resp.results.pop();
        omitted.hits += 1;
    }
    resp.count = resp.results.len();
    // The best hit alone is still too large: its text is cut.
    if over(resp, &omitted) && !resp.results.is_empty() {
        omitted.cut = true;
        fn text(h: &mut SearchHit) -> &mut String {
            match h {
                SearchHit::Chunk {
                    content, truncated, ..
                }
                | SearchHit::Category {
                    content, truncated, ..
                }
                | SearchHit::Note {
                    content, truncated, ..
                } => {
                    *truncated = Some(true);
                    content
                }
            }
        }
        let mut room = {
            let mut probe = resp.clone();
            text(&mut probe.results[0]).clear();
            probe.omitted = Some(omitted.clone());
            max.saturating_sub(tokens(&probe)).saturating_mul(4)
        };
        loop {
            cut(text(&mut resp.results[0]), room.max(1));
            if !over(resp, &omitted) || room <= 1 {
                break;
            }
            room /= 2;
        }
    }
    resp.omitted = Some(omitted);
}

/// Fits a page of a session into `max` tokens: fewer chunks, and `next_position` where the
/// page now ends.
pub fn fit_fetch(resp: &mut FetchResponse, max: usize) {
    let mut omitted = Omitted {
        max_tokens: max,
        ..Omitted::default()
    };
    let over = |r: &FetchResponse, o: &Omitted| {
        let mut probe = r.clone();
        probe.omitted = Some(o.clone());
        tokens(&probe) > max
    };
    if !over(resp, &omitted) {
        return;
    }
    while resp.chunks.len() > 1 && over(resp, &omitted) {
        resp.chunks.pop();
        omitted.chunks += 1;
    }
    if omitted.chunks > 0 {
        resp.next_position = resp.chunks.last().map(|c| c.position + 1);
    }
    if over(resp, &omitted) && !resp.chunks.is_empty() {
        omitted.cut = true;
        let mut room = {
            let mut probe = resp.clone();
            probe.chunks[0].content.clear();
            probe.omitted = Some(omitted.clone());
            max.saturating_sub(tokens(&probe)).saturating_mul(4)
        };
        loop {
            cut(&mut resp.chunks[0].content, room.max(1));
            if !over(resp, &omitted) || room <= 1 {
                break;
            }
            room /= 2;
        }
    }
    resp.omitted = Some(omitted);
}

/// Fits a context read into `max` tokens: categories from the end of `order` (the requested
/// list) are left out whole; if the first alone is still too large, its largest top-level keys
/// are left out until it fits. Each is named in `omitted`, so the agent can read it on its own.
pub fn fit_context(resp: &mut ContextResponse, order: &[String], max: usize) {
    let mut omitted = Omitted {
        max_tokens: max,
        ..Omitted::default()
    };
    let over = |r: &ContextResponse, o: &Omitted| {
        let mut probe = r.clone();
        probe.omitted = Some(o.clone());
        tokens(&probe) > max
    };
    if !over(resp, &omitted) {
        return;
    }
    let mut kept: Vec<&String> = Vec::new();
    for name in order {
        if resp.categories.contains_key(name) && !kept.contains(&name) {
            kept.push(name);
        }
    }
    while kept.len() > 1 && over(resp, &omitted) {
        let name = kept.pop().expect("more than one");
        resp.categories.remove(name);
        omitted.categories.insert(0, name.clone());
    }
    if let Some(first) = kept.first()
        && over(resp, &omitted)
        && let Some(read) = resp.categories.get_mut(*first)
        && let Some(data) = read.data.as_object_mut()
    {
        let mut by_size: Vec<(usize, String)> =
            data.iter().map(|(k, v)| (tokens(v), k.clone())).collect();
        by_size.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        for (_, key) in by_size {
            let mut probe = resp.clone();
            probe.omitted = Some(omitted.clone());
            if tokens(&probe) <= max {
                break;
            }
            if let Some(data) = resp
                .categories
                .get_mut(*first)
                .and_then(|r| r.data.as_object_mut())
            {
                data.remove(&key);
            }
            omitted.keys.push(key);
        }
    }
    resp.omitted = Some(omitted);
}

#[cfg(test)]
mod tests {
    use super::*;
    use memdir_api::ContextChunk;

    fn hit(p: u64, text: &str, ctx: usize) -> SearchHit {
        SearchHit::Chunk {
            session_id: "s".into(),
            position: p,
            chunk_id: format!("r:{p}"),
            project: String::new(),
            ts: "2026-11-30T00:00:00.000Z".into(),
            content: text.into(),
            score: 1.0,
            context: (0..ctx as u64)
                .map(|i| ContextChunk {
                    position: p + 1 + i,
                    content: "x".repeat(120),
                })
                .collect(),
            uri: memdir_api::uri::chunk("s", p),
            truncated: None,
            superseded_by: None,
            reviewed_at: None,
            explain: None,
        }
    }

    fn resp(hits: Vec<SearchHit>) -> SearchResponse {
        SearchResponse {
            count: hits.len(),
            results: hits,
            engine: "bm25".into(),
            query: "q".into(),
            mode: None,
            notes: None,
            note: None,
            omitted: None,
            coverage: None,
        }
    }

    #[test]
    fn context_goes_first_then_hits_and_the_best_hit_stays() {
        let mut r = resp(
            (0..5)
                .map(|i| hit(i * 10, &"word ".repeat(40), 6))
                .collect(),
        );
        let full = tokens(&r);
        fit_search(&mut r, full / 2);
        assert!(tokens(&r) <= full / 2, "{}", tokens(&r));
        let o = r.omitted.clone().unwrap();
        assert!(o.context_lines > 0);
        assert_eq!(r.count, r.results.len());
        // A budget for little more than one bare hit keeps the best one.
        let mut r = resp(
            (0..5)
                .map(|i| hit(i * 10, &"word ".repeat(40), 6))
                .collect(),
        );
        fit_search(&mut r, 120);
        assert_eq!(r.results.len(), 1);
        assert!(matches!(
            &r.results[0],
            SearchHit::Chunk { position: 0, .. }
        ));
        assert!(tokens(&r) <= 120, "{}", tokens(&r));
        assert_eq!(r.omitted.unwrap().hits, 4);
    }

    #[test]
    fn a_best_hit_too_large_alone_is_cut_with_a_mark() {
        let mut r = resp(vec![hit(0, &"long ".repeat(2000), 0)]);
        fit_search(&mut r, 200);
        assert!(tokens(&r) <= 200, "{}", tokens(&r));
        let SearchHit::Chunk {
            content, truncated, ..
        } = &r.results[0]
        else {
            panic!()
        };
        assert!(content.ends_with(CUT_MARK));
        assert_eq!(*truncated, Some(true));
        assert!(r.omitted.unwrap().cut);
    }

    fn context(cats: &[(&str, usize)]) -> ContextResponse {
        let read = |name: &str, keys: usize| memdir_api::ReadResponse {
            category: name.into(),
            data: serde_json::Value::Object(
                (0..keys)
                    .map(|k| (format!("k{k}"), "v".repeat(40 * (k + 1)).into()))
                    .collect(),
            ),
            missing_fields: Vec::new(),
            meta: Default::default(),
        };
        ContextResponse {
            categories: cats
                .iter()
                .map(|(n, k)| (n.to_string(), read(n, *k)))
                .collect(),
            missing: Vec::new(),
            errors: Default::default(),
            omitted: None,
        }
    }

    #[test]
    fn context_leaves_out_categories_from_the_end_then_the_largest_keys_of_the_first() {
        let order: Vec<String> = ["zeta", "alpha", "mid"].map(String::from).into();
        let mut r = context(&[("zeta", 4), ("alpha", 4), ("mid", 4)]);
        let full = tokens(&r);
        let one = tokens(&context(&[("zeta", 4)]));
        fit_context(&mut r, &order, one + 40);
        let o = r.omitted.clone().unwrap();
        // The requested order decides, not the names' order.
        assert_eq!(o.categories, vec!["alpha".to_string(), "mid".to_string()]);
        assert!(r.categories.contains_key("zeta") && o.keys.is_empty());
        assert!(tokens(&r) <= one + 40 && tokens(&r) < full);
        // Too small for the first whole: its largest keys go, largest first.
        let mut r = context(&[("zeta", 4), ("alpha", 4)]);
        fit_context(&mut r, &order, one - 30);
        let o = r.omitted.clone().unwrap();
        assert_eq!(o.keys.first().map(String::as_str), Some("k3"));
        assert!(r.categories["zeta"].data.get("k0").is_some());
        assert!(tokens(&r) <= one - 30, "{}", tokens(&r));
        // Within budget: untouched.
        let mut r = context(&[("zeta", 1)]);
        let before = serde_json::to_value(&r).unwrap();
        fit_context(&mut r, &order, 10_000);
        assert_eq!(serde_json::to_value(&r).unwrap(), before);
    }

    #[test]
    fn an_answer_within_budget_is_untouched() {
        let mut r = resp(vec![hit(0, "short", 1)]);
        let before = serde_json::to_value(&r).unwrap();
        fit_search(&mut r, 10_000);
        assert_eq!(serde_json::to_value(&r).unwrap(), before);
    }
}
