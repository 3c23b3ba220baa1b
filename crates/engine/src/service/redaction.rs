//! Redaction at the engine's doors: every ingest and every category write passes here before
//! anything reaches the files (see [`crate::redact`]).
use crate::service::Cx;

use std::borrow::Cow;

use crate::redact::Counts;
use memdir_api::NewChunk;

impl Cx<'_> {
    /// The chunks as they will be stored: content and metadata strings redacted. A chunk
    /// that was nothing but private text keeps a marker, so a batch does not fail on it and
    /// the session still shows that something was said.
    pub(crate) fn redact_chunks<'a>(
        &self,
        chunks: &'a [NewChunk],
    ) -> (Cow<'a, [NewChunk]>, Counts) {
        let r = &self.settings.redaction;
        let mut counts = Counts::new();
        if !r.enabled() {
            return (Cow::Borrowed(chunks), counts);
        }
        let mut out: Option<Vec<NewChunk>> = None;
        for (i, c) in chunks.iter().enumerate() {
            let content = r.text(&c.content, &mut counts);
            let metadata = c.metadata.as_ref().and_then(|m| r.value(m, &mut counts));
            if matches!(content, Cow::Borrowed(_)) && metadata.is_none() {
                continue;
            }
            let mut content = content.into_owned();
            if content.trim().is_empty() && !c.content.trim().is_empty() {
                content = "[REDACTED:private]".to_string();
            }
            let v = out.get_or_insert_with(|| chunks.to_vec());
            v[i].content = content;
            if let Some(m) = metadata {
                v[i].metadata = Some(m);
            }
        }
        match out {
            Some(v) => (Cow::Owned(v), counts),
            None => (Cow::Borrowed(chunks), counts),
        }
    }

    /// A category's data and reason as they will be stored.
    pub(crate) fn redact_data(
        &self,
        data: &serde_json::Value,
        reason: Option<&str>,
    ) -> (Option<serde_json::Value>, Option<String>, Counts) {
        let r = &self.settings.redaction;
        let mut counts = Counts::new();
        let data = r.value(data, &mut counts);
        let reason = reason.and_then(|s| match r.text(s, &mut counts) {
            Cow::Owned(t) => Some(t),
            Cow::Borrowed(_) => None,
        });
        (data, reason, counts)
    }
}
