//! Progress of long jobs (reindex, bulk ingest, import, sync, snapshot) for a person at a
//! terminal: a bar on stderr, drawn only when stderr is a terminal, so piped output and logs
//! stay clean. Built on `indicatif`; the engine reports `(done, total)` through a callback and
//! knows nothing of terminals.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar on stderr, or nothing when stderr is not a terminal. The bar is drawn from
/// the first report on: a job that reports nothing (most operations) shows nothing.
pub struct Progress {
    what: String,
    draw: bool,
    bar: std::sync::OnceLock<ProgressBar>,
}

impl Progress {
    /// A bar labelled `what` (`reindex`, `ingest`, ...), shown only on a terminal.
    pub fn new(what: &str) -> Progress {
        Progress::with_target(what, std::io::stderr().is_terminal())
    }

    /// A bar drawn or not, whatever stderr is (tests).
    pub fn with_target(what: &str, draw: bool) -> Progress {
        Progress {
            what: what.to_string(),
            draw,
            bar: std::sync::OnceLock::new(),
        }
    }

    /// The bar, made on the first report.
    fn bar(&self) -> &ProgressBar {
        self.bar.get_or_init(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(template(&self.what))
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_prefix(self.what.clone());
            bar
        })
    }

    /// Reports `done` of `total`.
    pub fn update(&self, done: u64, total: u64) {
        if !self.draw {
            return;
        }
        let b = self.bar();
        if b.length() != Some(total) {
            b.set_length(total);
        }
        b.set_position(done.min(total));
    }

    /// Whether a bar is drawn (once the job reports).
    pub fn visible(&self) -> bool {
        self.draw
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(b) = self.bar.get() {
            b.finish_and_clear();
        }
    }
}

/// The bar's text for a job, in the unit its engine call counts: bytes read (ingest, import,
/// reindex) as sizes with a rate, files copied (snapshot), chunks embedded (embed), or the
/// steps of a sync (no rate: steps are not alike).
fn template(what: &str) -> &'static str {
    match what {
        "ingest" | "checking" | "import" | "reindex" => {
            "{prefix} [{bar:30}] {bytes}/{total_bytes} at {bytes_per_sec}, eta {eta}"
        }
        "snapshot" => "{prefix} [{bar:30}] {human_pos}/{human_len} files, eta {eta}",
        "embed" => "{prefix} [{bar:30}] {human_pos}/{human_len} chunks, eta {eta}",
        "sync" => "{prefix} [{bar:30}] step {pos} of {len}",
        _ => "{prefix} [{bar:30}] {human_pos}/{human_len}, eta {eta}",
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::template;

    #[test]
    fn every_bar_names_its_unit_and_none_prints_a_raw_rate() {
        for what in [
            "ingest", "checking", "import", "reindex", "snapshot", "embed", "sync", "x",
        ] {
            let t = template(what);
            assert!(
                indicatif::ProgressStyle::with_template(t).is_ok(),
                "{what}: {t}"
            );
            assert!(
                !t.contains("{per_sec}") && !t.contains("{pos}/{len}"),
                "{what}: {t}"
            );
        }
        assert!(template("import").contains("{bytes}"));
        assert!(template("snapshot").contains("files"));
    }
}
