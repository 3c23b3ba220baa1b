//! Periods a question names: "in March", "May 2023", "on 7 May 2023", "2023-05-07", "during
//! 2022". A turn saved in one of them ranks higher ([`lift`]); the words themselves still match
//! as words. Written-out English dates only: a relative period ("last week") moves with the
//! clock, and `since` / `until` say it exactly.

use memdir_store::clock::{civil_from_days, days_from_civil};
use tantivy::Searcher;

use super::document::fast_ts;
use super::rank::Candidate;

/// Share of its own base score that a turn saved in a period the question names gains. A
/// question may name when a thing happens rather than when it was said ("Where were they going
/// in March?", asked of a chat in January): on the dev set a lift of 0.5 moved that question's
/// evidence from rank 3 to 4, 0.25 kept it at 3 (bench/devset/README.md).
pub const PERIOD_LIFT: f32 = 0.25;

const DAY_MS: i64 = 86_400_000;

/// A period named by a question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    /// From `start` (included) to `end` (excluded), milliseconds since the epoch, UTC.
    Span { start: i64, end: i64 },
    /// A month, or a day of a month, of any year: named without its year ("in March").
    Yearly { month: u32, day: Option<u32> },
}

impl Period {
    /// Whether a time (milliseconds since the epoch) falls in the period, by its UTC date.
    pub fn holds(&self, ts: i64) -> bool {
        match *self {
            Period::Span { start, end } => start <= ts && ts < end,
            Period::Yearly { month, day } => {
                let (_, m, d) = civil_from_days(ts.div_euclid(DAY_MS));
                m == month && day.is_none_or(|x| x == d)
            }
        }
    }
}

const MONTHS: [(&str, u32); 24] = [
    ("january", 1),
    ("jan", 1),
    ("february", 2),
    ("feb", 2),
    ("march", 3),
    ("mar", 3),
    ("april", 4),
    ("apr", 4),
    ("may", 5),
    ("june", 6),
    ("jun", 6),
    ("july", 7),
    ("jul", 7),
    ("august", 8),
    ("aug", 8),
    ("september", 9),
    ("sept", 9),
    ("sep", 9),
    ("october", 10),
    ("oct", 10),
    ("november", 11),
    ("nov", 11),
    ("december", 12),
    ("dec", 12),
];

/// Words that make the month or year after them a period ("in March", "during 2022"): a
/// month word alone may be something else ("May I ask", "a march"), a number of four digits
/// too ("error 2024"). "of" and "on" lead a month only ("the 7th of May", "on May 7").
const LEADS: [&str; 17] = [
    "in",
    "during",
    "since",
    "until",
    "till",
    "by",
    "before",
    "after",
    "early",
    "late",
    "mid",
    "from",
    "through",
    "throughout",
    "around",
    "of",
    "on",
];
const YEAR_LEADS: usize = 15;

fn month(w: &str) -> Option<u32> {
    let w = w.to_ascii_lowercase();
    MONTHS.iter().find(|(name, _)| *name == w).map(|(_, m)| *m)
}

fn year(w: &str) -> Option<i64> {
    if w.len() != 4 || !w.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    w.parse().ok().filter(|y| (1900..=2099).contains(y))
}

fn day(w: &str) -> Option<u32> {
    let lower = w.to_ascii_lowercase();
    let digits = ["st", "nd", "rd", "th"]
        .iter()
        .find_map(|s| lower.strip_suffix(s))
        .unwrap_or(&lower);
    if digits.is_empty() || digits.len() > 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

/// A date in days since the epoch; `None` for a date that does not exist.
fn valid(y: i64, m: u32, d: u32) -> Option<i64> {
    let days = days_from_civil(y, m, d);
    (civil_from_days(days) == (y, m, d)).then_some(days)
}

fn span_day(y: i64, m: u32, d: u32) -> Option<Period> {
    let start = valid(y, m, d)?;
    Some(Period::Span {
        start: start * DAY_MS,
        end: (start + 1) * DAY_MS,
    })
}

fn span_month(y: i64, m: u32) -> Option<Period> {
    let start = valid(y, m, 1)?;
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    Some(Period::Span {
        start: start * DAY_MS,
        end: valid(ny, nm, 1)? * DAY_MS,
    })
}

/// `YYYY-MM-DD` or `YYYY-MM`, of a date that exists.
fn iso(w: &str) -> Option<Period> {
    let b = w.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    match b.len() {
        10 if b[4] == b'-' && b[7] == b'-' && digits(0..4) && digits(5..7) && digits(8..10) => {
            span_day(year(&w[..4])?, w[5..7].parse().ok()?, w[8..].parse().ok()?)
        }
        7 if b[4] == b'-' && digits(0..4) && digits(5..7) => {
            span_month(year(&w[..4])?, w[5..].parse().ok()?)
        }
        _ => None,
    }
}

/// The periods `query` names, in the order written, each once.
pub fn named(query: &str) -> Vec<Period> {
    let words: Vec<&str> = query
        .split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .map(|w| w.trim_matches('-'))
        .filter(|w| !w.is_empty())
        .collect();
    let led = |i: usize, leads: &[&str]| {
        i > 0 && {
            let before = words[i - 1].to_ascii_lowercase();
            leads.contains(&before.as_str())
        }
    };
    let mut out: Vec<Period> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let mut next = i + 1;
        let found = if let Some(p) = iso(w) {
            Some(p)
        } else if let Some(m) = month(w) {
            let before = i.checked_sub(1).and_then(|j| day(words[j]));
            let after = words.get(i + 1).and_then(|x| day(x));
            let y_at = i + 1 + usize::from(after.is_some());
            let y = words.get(y_at).and_then(|x| year(x));
            next = y_at + usize::from(y.is_some());
            let d = after.or(before);
            match (y, d) {
                (Some(y), Some(d)) => span_day(y, m, d),
                (Some(y), None) => span_month(y, m),
                (None, Some(d)) => valid(2000, m, d).map(|_| Period::Yearly {
                    month: m,
                    day: Some(d),
                }),
                (None, None) if led(i, &LEADS) => Some(Period::Yearly {
                    month: m,
                    day: None,
                }),
                (None, None) => None,
            }
        } else {
            year(w)
                .filter(|_| led(i, &LEADS[..YEAR_LEADS]))
                .map(|y| Period::Span {
                    start: days_from_civil(y, 1, 1) * DAY_MS,
                    end: days_from_civil(y + 1, 1, 1) * DAY_MS,
                })
        };
        if let Some(p) = found
            && !out.contains(&p)
        {
            out.push(p);
        }
        i = next.max(i + 1);
    }
    out
}

/// Lifts each candidate saved in one of `periods` by [`PERIOD_LIFT`] of its base score (the
/// lift is kept in `period`, for `explain`). Candidates are read by their `ts` fast field.
pub(super) fn lift(s: &Searcher, cands: &mut [Candidate], periods: &[Period]) {
    if periods.is_empty() {
        return;
    }
    for c in cands.iter_mut() {
        let ts = c.addr.and_then(|addr| fast_ts(s, addr));
        if ts.is_some_and(|t| periods.iter().any(|p| p.holds(t))) {
            c.period = c.bm25 * PERIOD_LIFT;
            c.bm25 += c.period;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(y: i64, m: u32, d: u32) -> i64 {
        days_from_civil(y, m, d) * DAY_MS
    }

    #[test]
    fn written_dates_months_and_years_are_periods() {
        let day = |y, m, d| Period::Span {
            start: ms(y, m, d),
            end: ms(y, m, d) + DAY_MS,
        };
        let month = |y, m| span_month(y, m).unwrap();
        assert_eq!(
            named("what did we decide on 7 May 2023?"),
            [day(2023, 5, 7)]
        );
        assert_eq!(named("the plan of May 7th, 2023"), [day(2023, 5, 7)]);
        assert_eq!(named("standup 2023-05-07 notes"), [day(2023, 5, 7)]);
        assert_eq!(named("what shipped in March 2024"), [month(2024, 3)]);
        assert_eq!(named("releases 2024-02"), [month(2024, 2)]);
        assert_eq!(
            named("what happened in 2022"),
            [Period::Span {
                start: ms(2022, 1, 1),
                end: ms(2023, 1, 1)
            }]
        );
        assert_eq!(
            named("Where were they going in March?"),
            [Period::Yearly {
                month: 3,
                day: None
            }]
        );
        assert_eq!(
            named("the call on Dec 24"),
            [Period::Yearly {
                month: 12,
                day: Some(24)
            }]
        );
        // December's end runs into the next year.
        assert_eq!(
            month(2023, 12),
            Period::Span {
                start: ms(2023, 12, 1),
                end: ms(2024, 1, 1)
            }
        );
    }

    #[test]
    fn words_that_only_look_like_dates_are_not() {
        for q in [
            "May I ask what the pool size is",
            "the march to the sea",
            "a list of 2000 words",
            "error 2024 in the parser",
            "February 30 2023",
            "2023-13-01",
            "2023-02-29",
            "port 8080 and mar",
        ] {
            let p = named(q);
            assert!(p.is_empty(), "{q}: {p:?}");
        }
    }

    #[test]
    fn a_period_holds_the_times_of_its_utc_dates() {
        let march = Period::Yearly {
            month: 3,
            day: None,
        };
        assert!(march.holds(ms(2023, 3, 1)));
        assert!(march.holds(ms(1999, 3, 31) + DAY_MS - 1));
        assert!(!march.holds(ms(2023, 4, 1)));
        assert!(!march.holds(ms(2023, 3, 1) - 1));
        let day = named("on 2023-05-07")[0];
        assert!(day.holds(ms(2023, 5, 7)));
        assert!(day.holds(ms(2023, 5, 8) - 1));
        assert!(!day.holds(ms(2023, 5, 8)));
        // Before 1970 too.
        assert!(named("in 1969")[0].holds(ms(1969, 7, 20)));
    }
}
