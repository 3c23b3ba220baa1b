//! Edits of a note's text, pure: replace one occurrence, insert after a line, append, cut a
//! range of lines. The engine's operations and the memory-tool protocol share them, and word
//! their failures each in their own way.

/// Why a replacement was not made.
#[derive(Debug, PartialEq, Eq)]
pub enum ReplaceError {
    /// `old` does not occur.
    Absent,
    /// `old` occurs more than once: the lines (from 1) where each occurrence starts.
    Many(Vec<u64>),
}

/// The line (from 1) holding byte `at` of `text`.
pub fn line_of(text: &str, at: usize) -> u64 {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count() as u64
        + 1
}

/// `text` with its one occurrence of `old` replaced by `new`, and the line it started on.
pub fn replace_once(text: &str, old: &str, new: &str) -> Result<(String, u64), ReplaceError> {
    if old.is_empty() {
        return Err(ReplaceError::Absent);
    }
    let found: Vec<usize> = text.match_indices(old).map(|(i, _)| i).collect();
    match found.as_slice() {
        [] => Err(ReplaceError::Absent),
        [at] => {
            let mut out = String::with_capacity(text.len() + new.len());
            out.push_str(&text[..*at]);
            out.push_str(new);
            out.push_str(&text[at + old.len()..]);
            Ok((out, line_of(text, *at)))
        }
        many => Err(ReplaceError::Many(
            many.iter().map(|at| line_of(text, *at)).collect(),
        )),
    }
}

/// The lines of `text` as the protocol counts them: split on `\n`, a final newline ending the
/// last line rather than starting an empty one.
pub fn lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    text.strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect()
}

/// `text` with `insert` placed after line `after` (0: at the start), or `Err(n)` with the
/// number of lines when `after` is past them. The inserted text becomes whole lines.
pub fn insert_after(text: &str, after: u64, insert: &str) -> Result<String, u64> {
    let ls = lines(text);
    let n = ls.len() as u64;
    if after > n {
        return Err(n);
    }
    let insert = insert.strip_suffix('\n').unwrap_or(insert);
    let mut out: Vec<&str> = Vec::with_capacity(ls.len() + 1);
    out.extend(&ls[..after as usize]);
    out.push(insert);
    out.extend(&ls[after as usize..]);
    let mut joined = out.join("\n");
    joined.push('\n');
    Ok(joined)
}

/// `text` with `more` added at the end on a line of its own.
pub fn append(text: &str, more: &str) -> String {
    let mut out = String::with_capacity(text.len() + more.len() + 2);
    out.push_str(text);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(more);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Numbered lines, and the first and last numbers among them (`[0, 0]` when none).
pub type Cut = (Vec<(u64, String)>, [u64; 2]);

/// The lines `range` (`[first, last]` from 1, `last` -1 for the end) of `text`, clamped to it:
/// the lines and the first and last numbers returned (`[0, 0]` when none).
pub fn cut(text: &str, range: Option<&[i64]>) -> Result<Cut, String> {
    let ls = lines(text);
    let n = ls.len() as i64;
    let (first, last) = match range {
        None => (1, n),
        Some([a, b]) => {
            if *a < 1 {
                return Err(format!("the first line must be 1 or more; got {a}"));
            }
            if *a > n.max(1) {
                return Err(format!(
                    "the first line must be within the file's {n} lines, [1, {n}]; got {a}"
                ));
            }
            if *b != -1 && *b < *a {
                return Err(format!(
                    "the last line must be -1 (the end) or at least the first ({a}); got {b}"
                ));
            }
            (*a, if *b == -1 { n } else { (*b).min(n) })
        }
        Some(other) => {
            return Err(format!(
                "view_range is two numbers, [first, last]; got {} of them",
                other.len()
            ));
        }
    };
    if first > last {
        return Ok((Vec::new(), [0, 0]));
    }
    let out: Vec<(u64, String)> = (first..=last)
        .map(|i| (i as u64, ls[(i - 1) as usize].to_string()))
        .collect();
    Ok((out, [first as u64, last as u64]))
}

/// Lines numbered as the memory tool shows them: the number right-aligned in six columns, a
/// tab, the line.
pub fn numbered(lines: &[(u64, String)]) -> String {
    lines
        .iter()
        .map(|(n, l)| format!("{n:>6}\t{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_needs_exactly_one_occurrence() {
        assert_eq!(
            replace_once("a\nb\nc\n", "b", "B"),
            Ok(("a\nB\nc\n".to_string(), 2))
        );
        assert_eq!(replace_once("a\nb\n", "x", "y"), Err(ReplaceError::Absent));
        assert_eq!(
            replace_once("b\na\nb\n", "b", "y"),
            Err(ReplaceError::Many(vec![1, 3]))
        );
        assert_eq!(replace_once("abc", "", "y"), Err(ReplaceError::Absent));
        // Across lines, and with the replacement empty.
        assert_eq!(
            replace_once("one\ntwo\nthree", "one\ntwo\n", ""),
            Ok(("three".to_string(), 1))
        );
    }

    #[test]
    fn insertions_count_lines_from_zero_at_the_start() {
        assert_eq!(insert_after("a\nb", 1, "x"), Ok("a\nx\nb\n".to_string()));
        assert_eq!(
            insert_after("a\nb\n", 0, "x\n"),
            Ok("x\na\nb\n".to_string())
        );
        assert_eq!(insert_after("a\nb\n", 2, "x"), Ok("a\nb\nx\n".to_string()));
        assert_eq!(insert_after("a\nb\n", 3, "x"), Err(2));
        assert_eq!(insert_after("", 0, "x"), Ok("x\n".to_string()));
    }

    #[test]
    fn appends_start_a_line_of_their_own() {
        assert_eq!(append("a", "b"), "a\nb\n");
        assert_eq!(append("a\n", "b\n"), "a\nb\n");
        assert_eq!(append("", "b"), "b\n");
    }

    #[test]
    fn ranges_are_inclusive_and_clamped() {
        let t = "l1\nl2\nl3\nl4\n";
        let (got, r) = cut(t, Some(&[2, 3])).unwrap();
        assert_eq!(r, [2, 3]);
        assert_eq!(numbered(&got), "     2\tl2\n     3\tl3");
        assert_eq!(cut(t, Some(&[3, -1])).unwrap().1, [3, 4]);
        assert_eq!(cut(t, Some(&[2, 99])).unwrap().1, [2, 4]);
        assert_eq!(
            cut(t, Some(&[9, -1])).unwrap_err(),
            "the first line must be within the file's 4 lines, [1, 4]; got 9"
        );
        assert_eq!(cut("", Some(&[1, -1])).unwrap().1, [0, 0]);
        assert!(cut(t, Some(&[0, 2])).is_err());
        assert!(cut(t, Some(&[3, 2])).is_err());
        assert!(cut(t, Some(&[3])).is_err());
        assert_eq!(cut("", None).unwrap().1, [0, 0]);
    }
}
