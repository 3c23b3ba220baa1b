//! Wall-clock time and the hybrid logical clock.
//!
//! Every record carries an HLC stamp `YYYYMMDDTHHMMSSmmmZ-CCCC`: fixed width, UTC, sorting as
//! time, free of `:`. A stamp is the wall-clock millisecond plus a counter that breaks ties
//! within one millisecond; stamps issued by one replica only ever increase, even when the wall
//! clock steps back.
//!
//! Tests fix the clock with `MEMDIR_CLOCK` (RFC 3339 or milliseconds since the epoch); the HLC
//! counter then keeps stamps unique.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, from `MEMDIR_CLOCK` when set.
pub fn now_ms() -> i64 {
    if let Some(fixed) = crate::env::process_raw("MEMDIR_CLOCK")
        && let Some(ms) = parse_time(&fixed)
    {
        return ms;
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day), proleptic Gregorian, to days since 1970-01-01.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 } as i64;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

struct Parts {
    y: i64,
    mo: u32,
    d: u32,
    h: i64,
    mi: i64,
    s: i64,
    ms: i64,
}

fn parts(ms: i64) -> Parts {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    Parts {
        y,
        mo,
        d,
        h: rem / 3_600_000,
        mi: rem / 60_000 % 60,
        s: rem / 1000 % 60,
        ms: rem % 1000,
    }
}

/// RFC 3339 UTC with milliseconds: `2026-11-29T11:02:03.004Z`.
pub fn rfc3339(ms: i64) -> String {
    let p = parts(ms);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        p.y, p.mo, p.d, p.h, p.mi, p.s, p.ms
    )
}

/// A time a person types for a filter, in epoch milliseconds: whatever [`parse_time`] takes,
/// or a time relative to `now_ms`: `30m`, `12h`, `7d`, `2w` ago (any case), `today` or
/// `yesterday` (the start of that day in UTC, as every stored time is). Returns whether it names a whole day (a date, `today`,
/// `yesterday`), so an upper bound can take the whole of it.
pub fn parse_when(s: &str, now_ms: i64) -> Option<(i64, bool)> {
    let s = s.trim();
    let day = 86_400_000;
    let today = now_ms.div_euclid(day) * day;
    match s.to_ascii_lowercase().as_str() {
        "today" => return Some((today, true)),
        "yesterday" => return Some((today - day, true)),
        "now" => return Some((now_ms, false)),
        _ => {}
    }
    if let Some(unit) = s
        .chars()
        .last()
        .map(|c| c.to_ascii_lowercase())
        .filter(|c| "mhdw".contains(*c))
        && s.len() > 1
        && s[..s.len() - 1].bytes().all(|b| b.is_ascii_digit())
    {
        let n: i64 = s[..s.len() - 1].parse().ok()?;
        let ms = match unit {
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => day,
            _ => 7 * day,
        };
        return Some((now_ms.checked_sub(n.checked_mul(ms)?)?, false));
    }
    parse_time(s).map(|t| (t, s.len() == 10))
}

/// Parses RFC 3339 (`Z` or `±HH:MM` offset, optional fraction), a bare date `YYYY-MM-DD`, or
/// an integer of milliseconds since the epoch.
pub fn parse_time(s: &str) -> Option<i64> {
    let s = s.trim();
    // Every accepted form is ASCII; slicing below assumes one byte per character.
    if !s.is_ascii() {
        return None;
    }
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok();
    }
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        if t.bytes().all(|c| c.is_ascii_digit()) {
            t.parse().ok()
        } else {
            None
        }
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)? as u32, num(8..10)? as u32);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let day_ms = days_from_civil(y, mo, d) * 86_400_000;
    if b.len() == 10 {
        return Some(day_ms);
    }
    if b.len() < 19
        || !(b[10] == b'T' || b[10] == b't' || b[10] == b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac_ms = 0i64;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = s.get(start..i)?;
        if digits.is_empty() {
            return None;
        }
        let padded: String = digits.chars().chain("000".chars()).take(3).collect();
        frac_ms = padded.parse().ok()?;
    }
    let offset_min = match s.get(i..)? {
        "Z" | "z" => 0,
        rest if rest.len() == 6
            && (rest.starts_with('+') || rest.starts_with('-'))
            && &rest[3..4] == ":" =>
        {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (oh * 60 + om)
        }
        _ => return None,
    };
    Some(day_ms + ((h * 60 + mi - offset_min) * 60 + sec) * 1000 + frac_ms)
}

/// A hybrid logical clock stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hlc {
    /// Milliseconds since the epoch.
    pub ms: i64,
    /// Tie-breaking counter within one millisecond, 0..=9999.
    pub counter: u16,
}

/// How far ahead of this machine's wall clock a stamp read from the files (a hand edit, another
/// replica's segment) may move this clock. A stamp further ahead is not admitted: one bad stamp
/// must not drag every later write into the far future or to the end of the stamp range.
pub const MAX_FORWARD_MS: i64 = 24 * 3_600_000;

/// The last millisecond a stamp can name: 9999-12-31T23:59:59.999Z.
pub const MAX_MS: i64 = 253_402_300_799_999;

impl Hlc {
    /// The zero stamp.
    pub const ZERO: Hlc = Hlc { ms: 0, counter: 0 };

    /// The largest stamp that formats in the fixed width.
    pub const MAX: Hlc = Hlc {
        ms: MAX_MS,
        counter: 9999,
    };

    /// Whether a stamp read from the files may move the clock at wall-clock time `now`.
    pub fn admissible(self, now: i64) -> bool {
        self.ms <= now.saturating_add(MAX_FORWARD_MS)
    }

    /// The next stamp after `self` at wall-clock time `now`; saturates at [`Hlc::MAX`], so a
    /// stamp always formats and parses (callers that need a strictly greater stamp check).
    pub fn tick(self, now: i64) -> Hlc {
        let now = now.min(MAX_MS);
        if self >= Hlc::MAX {
            Hlc::MAX
        } else if now > self.ms {
            Hlc {
                ms: now,
                counter: 0,
            }
        } else if self.counter < 9999 {
            Hlc {
                ms: self.ms,
                counter: self.counter + 1,
            }
        } else {
            Hlc {
                ms: self.ms + 1,
                counter: 0,
            }
        }
    }

    /// Parses `YYYYMMDDTHHMMSSmmmZ-CCCC`.
    pub fn parse(s: &str) -> Option<Hlc> {
        if !s.is_ascii() {
            return None;
        }
        let b = s.as_bytes();
        if b.len() != 24 || b[8] != b'T' || b[18] != b'Z' || b[19] != b'-' {
            return None;
        }
        let digits = |r: std::ops::Range<usize>| -> Option<i64> {
            let t = &s[r];
            if t.bytes().all(|c| c.is_ascii_digit()) {
                t.parse().ok()
            } else {
                None
            }
        };
        let iso = format!(
            "{}-{}-{}T{}:{}:{}.{}Z",
            &s[0..4],
            &s[4..6],
            &s[6..8],
            &s[9..11],
            &s[11..13],
            &s[13..15],
            &s[15..18]
        );
        digits(0..8)?;
        digits(9..18)?;
        let ms = parse_time(&iso)?;
        let counter = digits(20..24)? as u16;
        let h = Hlc { ms, counter };
        (h.to_string() == s).then_some(h)
    }
}

impl std::fmt::Display for Hlc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = parts(self.ms);
        write!(
            f,
            "{:04}{:02}{:02}T{:02}{:02}{:02}{:03}Z-{:04}",
            p.y, p.mo, p.d, p.h, p.mi, p.s, p.ms, self.counter
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_person_may_type_relative_times_and_day_names() {
        use super::parse_when;
        let now = super::parse_time("2026-12-02T15:30:00Z").unwrap();
        let at = |s: &str| parse_when(s, now).map(|(t, day)| (super::rfc3339(t), day));
        let day = |s: &str| Some((s.to_string(), true));
        assert_eq!(at("today"), day("2026-12-02T00:00:00.000Z"));
        assert_eq!(at("Yesterday"), day("2026-12-01T00:00:00.000Z"));
        assert_eq!(at("7d"), Some(("2026-11-25T15:30:00.000Z".into(), false)));
        assert_eq!(at("12h"), Some(("2026-12-02T03:30:00.000Z".into(), false)));
        assert_eq!(at("30m"), Some(("2026-12-02T15:00:00.000Z".into(), false)));
        assert_eq!(at("2w"), Some(("2026-11-18T15:30:00.000Z".into(), false)));
        assert_eq!(at("2026-11-29"), day("2026-11-29T00:00:00.000Z"));
        for bad in [
            "d",
            "7y",
            "-7d",
            "seven days",
            "7 d",
            "99999999999999999999d",
            "",
        ] {
            assert_eq!(parse_when(bad, now), None, "{bad}");
        }
    }

    use super::*;

    #[test]
    fn rfc3339_round_trips() {
        for ms in [0, 1_764_414_123_004, 951_782_400_000, -86_400_000] {
            assert_eq!(parse_time(&rfc3339(ms)), Some(ms));
        }
        assert_eq!(rfc3339(1_764_414_123_004), "2025-11-29T11:02:03.004Z");
        assert_eq!(
            parse_time("2025-11-29T12:02:03+01:00"),
            Some(1_764_414_123_000)
        );
        assert_eq!(parse_time("2025-11-29"), Some(1_764_374_400_000));
        assert_eq!(parse_time("2025-13-01"), None);
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn hlc_is_fixed_width_sortable_and_monotonic() {
        let a = Hlc {
            ms: 1_764_414_123_004,
            counter: 7,
        };
        assert_eq!(a.to_string(), "20251129T110203004Z-0007");
        assert_eq!(Hlc::parse(&a.to_string()), Some(a));
        let b = a.tick(a.ms - 5_000);
        assert!(b > a && b.to_string() > a.to_string());
        let c = Hlc {
            ms: 5,
            counter: 9999,
        }
        .tick(0);
        assert_eq!(c, Hlc { ms: 6, counter: 0 });
        assert!(Hlc::parse("20251129T110203004Z-007").is_none());
    }

    /// Bug: ticking from the largest stamp made one that could not be formatted or parsed.
    #[test]
    fn tick_never_leaves_the_stamp_range() {
        let max = Hlc::parse("99991231T235959999Z-9999").expect("the largest stamp parses");
        assert_eq!(max, Hlc::MAX);
        assert_eq!(max.tick(0), Hlc::MAX);
        let near = Hlc::parse("99991231T235959999Z-9998").unwrap();
        assert_eq!(near.tick(i64::MAX), Hlc::MAX);
        assert_eq!(
            Hlc::parse(&Hlc::MAX.tick(i64::MAX).to_string()),
            Some(Hlc::MAX)
        );
        let now = 1_764_414_123_004;
        assert!(
            Hlc {
                ms: now + 1000,
                counter: 0
            }
            .admissible(now)
        );
        assert!(!max.admissible(now));
    }
}
