//! Clock stamps (`clock::Hlc`) and time parsing (`clock::parse_time`, `clock::rfc3339`):
//! round trips, stamps that sort as their values, `tick` that always moves forward to a stamp
//! that parses, and parsers that never panic.

use memdir_store::clock::{Hlc, parse_time, rfc3339};
use proptest::prelude::*;

use crate::arb;

/// The largest stamp: 9999-12-31T23:59:59.999Z, counter 9999.
fn largest() -> Hlc {
    Hlc {
        ms: arb::stamp_range().1,
        counter: 9999,
    }
}

/// 24-byte strings shaped like stamps: a valid stamp with some characters replaced by others
/// of the same total width, so multi-byte characters land on the parser's slice points.
fn stamp_like() -> impl Strategy<Value = String> {
    let wide = prop_oneof![
        Just('é'),
        Just('€'),
        Just('😀'),
        Just('\u{80}'),
        any::<char>()
    ];
    (arb::hlc(), any::<usize>(), wide).prop_map(|(h, at, c)| {
        let s = h.to_string();
        let w = c.len_utf8();
        let at = at % (s.len() - w + 1);
        format!("{}{}{}", &s[..at], c, &s[at + w..])
    })
}

/// Text shaped like RFC 3339 with an offset, with one character swapped for any other,
/// inserted, or a run of characters replaced by one of the same width in bytes.
pub fn time_like() -> BoxedStrategy<String> {
    let base = prop_oneof![
        arb::hlc().prop_map(|h| rfc3339(h.ms)),
        arb::hlc().prop_map(|h| format!("{}+01:30", &rfc3339(h.ms)[..19])),
        arb::hlc().prop_map(|h| format!("{}-11:00", &rfc3339(h.ms)[..23])),
        arb::hlc().prop_map(|h| rfc3339(h.ms)[..10].to_string()),
        arb::hlc().prop_map(|h| h.ms.to_string()),
    ];
    // Half the edits fall in the last eight characters, where an offset is.
    let at = prop_oneof![any::<usize>(), (0usize..8).prop_map(|k| usize::MAX - k)];
    (base, at, arb::char_(), 0u8..4)
        .prop_map(|(s, at, c, how)| {
            let chars: Vec<char> = s.chars().collect();
            let at = if at > usize::MAX - 8 {
                chars.len().saturating_sub(usize::MAX - at + 1)
            } else {
                at % (chars.len() + 1)
            };
            let mut out: Vec<char> = chars.clone();
            let w = c.len_utf8();
            match how {
                0 if at < chars.len() => out[at] = c,
                1 => out.insert(at, c),
                // `s` is ASCII: replacing `w` characters by `c` keeps every byte offset after it.
                2 if at + w <= chars.len() => {
                    out.splice(at..at + w, [c]);
                }
                _ => out.truncate(at),
            }
            out.into_iter().collect()
        })
        .boxed()
}

proptest! {
    #![proptest_config(crate::config(2000))]

    /// Every stamp formats to 24 bytes and parses back to itself.
    #[test]
    fn stamps_round_trip(h in arb::hlc()) {
        let s = h.to_string();
        prop_assert_eq!(s.len(), 24, "{}", s);
        prop_assert_eq!(Hlc::parse(&s), Some(h));
    }

    /// Formatted stamps sort exactly as the stamps do.
    #[test]
    fn stamps_sort_as_their_values(a in arb::hlc(), b in arb::hlc()) {
        prop_assert_eq!(a.to_string().cmp(&b.to_string()), a.cmp(&b));
    }

    /// `tick` always moves forward, and its stamp parses back.
    #[test]
    fn tick_moves_forward_to_a_stamp_that_parses(h in arb::hlc(), now in arb::hlc()) {
        // Ticking saturates at the largest stamp, which always formats and parses.
        let t = h.tick(now.ms);
        prop_assert!(t > h || h == Hlc::MAX);
        prop_assert!(t.ms >= now.ms.min(memdir_store::clock::MAX_MS));
        prop_assert!(t.counter <= 9999);
        prop_assert_eq!(Hlc::parse(&t.to_string()), Some(t), "{} ticked to {}", h, t);
    }

    /// `Hlc::parse` never panics, and what it accepts is canonical.
    #[test]
    fn stamp_parser_never_panics(s in prop_oneof![stamp_like(), arb::text(30)]) {
        if let Some(h) = Hlc::parse(&s) {
            prop_assert_eq!(h.to_string(), s);
        }
    }

    /// RFC 3339 text round trips for every representable millisecond.
    #[test]
    fn rfc3339_round_trips(h in arb::hlc()) {
        let s = rfc3339(h.ms);
        prop_assert_eq!(parse_time(&s), Some(h.ms), "{}", s);
    }

    /// `parse_time` never panics on any text, however close to a valid time.
    #[test]
    fn time_parser_never_panics(s in prop_oneof![time_like(), arb::text(30)]) {
        let _ = parse_time(&s);
    }
}

/// Bug (fixed): `Hlc::tick` from the largest stamp
/// (`99991231T235959999Z-9999`) returns a stamp in year 10000 that formats to 25 bytes and
/// did not parse; memdir wrote it into a history file name or a chunk line and then failed to
/// read it. Now the tick saturates at the largest stamp.
#[test]
fn tick_from_the_largest_stamp_still_parses() {
    let h = largest();
    assert_eq!(h.to_string(), "99991231T235959999Z-9999");
    for now in [0, h.ms, h.ms + 1] {
        // Ticking saturates at the largest stamp: the clock never leaves the range it can
        // write (memdir keeps versions and segment lines ordered by other means there).
        let t = h.tick(now);
        assert_eq!(t, h);
        assert_eq!(Hlc::parse(&t.to_string()), Some(t), "tick({now}) gave {t}");
    }
}

/// Bug (fixed): `parse_time("2025-11-29T12:02:03+0é00")` panics ("byte index 3 is not a char
/// boundary") instead of returning `None`. It is reachable from every surface through the
/// `since`/`until` search filters: `memdir search x --since '2025-11-29T12:02:03+0é00'` exits
/// 101 with a panic, and MCP `memory_search` answers an `internal` "tool call panicked" error.
/// Expected: `None`, so the filter is an `invalid` error.
#[test]
fn a_non_ascii_character_in_a_time_offset_is_an_error_not_a_panic() {
    assert_eq!(parse_time("2025-11-29T12:02:03+0é00"), None);
    assert_eq!(parse_time("2025-11-29T12:02:03.5+0é00"), None);
}

/// Bug (fixed): `Hlc::parse` of a 24-byte string with a multi-byte character across one of its
/// fixed slice points (`"202é129T110203004Z-0007"`) panics instead of returning `None`. It is
/// reachable from files: a chunk line whose `hlc` is such a string panics `parse_chunk_line`,
/// so one damaged or hand-edited segment line crashes every reader instead of being reported
/// as a bad line. Expected: `None`.
#[test]
fn a_multi_byte_character_in_a_stamp_is_an_error_not_a_panic() {
    assert_eq!(Hlc::parse("202é129T110203004Z-0007"), None);
}
