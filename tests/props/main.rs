//! Property tests: generated inputs against the codecs, readers, name encoder, clock and
//! query planner, checking round trips and that no input makes memdir panic.
//!
//! Each module covers one target. Case counts are sized so the whole binary finishes in well
//! under a minute in a debug build; `PROPTEST_CASES=<n>` overrides every count for a longer
//! local run. A failing case is saved beside its module as `<module>.regressions` and replayed
//! first on every later run: commit those files.

mod arb;

mod category;
mod chunk_line;
mod history;
mod hlc;
mod name;
mod query;
mod sync;

use proptest::test_runner::{Config, FileFailurePersistence};

/// The configuration of one property: `cases` unless `PROPTEST_CASES` says otherwise, and
/// failures persisted next to the module that found them.
pub fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        // Properties that leave out a known bug's inputs reject some cases; allow for that at
        // any case count.
        max_global_rejects: cases.saturating_mul(2).max(1024),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..Config::default()
    }
}
