//! Excerpts: the part of a text that shows why it matched, cut to a length around the densest
//! cluster of the query's words.

use tantivy::tokenizer::TokenStream;

use super::query::query_words;
use crate::index::SearchIndex;
use memdir_api::error::Result;

/// Marks where an excerpt was cut.
pub const CUT_MARK: char = '…';

/// The words of a query as the index analyzes them, to find in the texts of hits.
pub struct Terms {
    words: std::collections::HashSet<String>,
    analyzer: Option<tantivy::tokenizer::TextAnalyzer>,
}

impl Terms {
    pub fn new(idx: &SearchIndex, query: &str) -> Result<Terms> {
        let words = query_words(idx, query, false)?
            .into_iter()
            .map(|(_, w)| w)
            .collect();
        Ok(Terms {
            words,
            analyzer: Some(idx.analyzer()?),
        })
    }

    /// No words: excerpts start at the beginning.
    pub fn none() -> Terms {
        Terms {
            words: Default::default(),
            analyzer: None,
        }
    }

    /// Byte spans of the words of `text` that match the query.
    fn spans(&mut self, text: &str) -> Vec<(usize, usize)> {
        let (Some(a), false) = (self.analyzer.as_mut(), self.words.is_empty()) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut ts = a.token_stream(text);
        while let Some(t) = ts.next() {
            if self.words.contains(&t.text) {
                out.push((t.offset_from, t.offset_to));
            }
        }
        out
    }
}

/// An excerpt of `text` of at most `max` characters (`None`: the whole text) around the
/// densest cluster of the query's words (the beginning when none occurs), cut at word
/// boundaries where one is near, with [`CUT_MARK`] at each end that was cut. Returns whether it
/// was cut.
pub fn excerpt(text: &str, terms: &mut Terms, max: Option<usize>) -> (String, bool) {
    let Some(max) = max else {
        return (text.to_string(), false);
    };
    let n = text.chars().count();
    if n <= max {
        return (text.to_string(), false);
    }
    // Character index of every byte offset that starts a char.
    let starts: Vec<usize> = text.char_indices().map(|(b, _)| b).collect();
    let char_at = |byte: usize| starts.partition_point(|&b| b < byte);
    let spans: Vec<(usize, usize)> = terms
        .spans(text)
        .into_iter()
        .map(|(a, b)| (char_at(a), char_at(b)))
        .collect();
    let room = max.saturating_sub(2).max(1);
    let mut from = 0usize;
    if !spans.is_empty() {
        // The window of `room` characters holding the most matches, then centred on them.
        let (mut best, mut best_count, mut j) = ((spans[0].0, spans[0].1), 0usize, 0usize);
        for i in 0..spans.len() {
            j = j.max(i);
            while j + 1 < spans.len() && spans[j + 1].1 - spans[i].0 <= room {
                j += 1;
            }
            if j - i + 1 > best_count {
                best_count = j - i + 1;
                best = (spans[i].0, spans[j].1.max(spans[i].1));
            }
        }
        let centre = (best.0 + best.1) / 2;
        from = centre.saturating_sub(room / 2).min(n - room);
        // Never cut into the first match.
        from = from.min(best.0);
    }
    let chars: Vec<char> = text.chars().collect();
    let mut to = (from + room).min(n);
    // Prefer word boundaries within a few characters.
    if from > 0
        && let Some(k) = (from..(from + 12).min(to)).find(|&k| chars[k - 1].is_whitespace())
    {
        from = k;
    }
    if to < n
        && let Some(k) = ((to.saturating_sub(12)).max(from + 1)..=to)
            .rev()
            .find(|&k| chars[k].is_whitespace())
    {
        to = k;
    }
    let mut out = String::with_capacity(max * 2);
    if from > 0 {
        out.push(CUT_MARK);
    }
    out.extend(chars[from..to].iter().copied());
    let out_trimmed_len = out.trim_end().len();
    out.truncate(out_trimmed_len);
    if to < n {
        out.push(CUT_MARK);
    }
    (out, true)
}
