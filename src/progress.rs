//! Progress of long jobs (reindex, bulk ingest, import, sync, snapshot) for a person at a
//! terminal: a bar on stderr, drawn only when stderr is a terminal, so piped output and logs
//! stay clean. Built on `indicatif`; the engine reports `(done, total)` through a callback and
//! knows nothing of terminals.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar on stderr, or nothing when stderr is not a terminal.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar labelled `what` (`reindex`, `ingest`, ...), shown only on a terminal.
    pub fn new(what: &str) -> Progress {
        Progress::with_target(what, std::io::stderr().is_terminal())
    }

    /// A bar drawn or not, whatever stderr is (tests).
    pub fn with_target(what: &str, draw: bool) -> Progress {
        if !draw {
            return Progress { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        let style =
            ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(what.to_string());
        Progress { bar: Some(bar) }
    }

    /// Reports `done` of `total`.
    pub fn update(&self, done: u64, total: u64) {
        if let Some(b) = &self.bar {
            if b.length() != Some(total) {
                b.set_length(total);
            }
            b.set_position(done.min(total));
        }
    }

    /// Whether a bar is drawn.
    pub fn visible(&self) -> bool {
        self.bar.is_some()
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
