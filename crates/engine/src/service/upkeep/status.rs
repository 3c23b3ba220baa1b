//! Status and health: counts, sizes and the state of the derived indexes (`status`), and the
//! report that names the directory and checks everything (`doctor`).
use crate::service::Upkeep;

use std::path::Path;

use serde_json::{Value, json};

use crate::ledger::ChangeKind;
use crate::service::Inner;
use memdir_api::error::Result;
use memdir_store::model::CategoryStatus;

impl Upkeep<'_> {
    /// Where the memory is, and a full check.
    pub fn doctor(&self) -> Result<memdir_api::DoctorResponse> {
        Ok(memdir_api::DoctorResponse {
            dir: self.layout.root.display().to_string(),
            dir_source: self.settings.dir_source.clone(),
            actor: self.actor(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            status: self.status_as(&|_| true)?,
            checks: self.verify()?,
        })
    }

    /// `memdir status`: counts, sizes and health, as a device that reads only the categories
    /// `read` accepts: the counts of categories and logs, and the malformed ones, are of those
    /// alone (`&|_| true` for the whole store).
    pub fn status_as(&self, read: &dyn Fn(&str) -> bool) -> Result<memdir_api::StatusResponse> {
        let root = self.layout.root.display().to_string();
        let mut guard = self.inner()?;
        let Some(inner) = guard.as_mut() else {
            return Ok(memdir_api::StatusResponse {
                dir: root,
                dir_source: self.settings.dir_source.clone(),
                exists: self.layout.exists(),
                replica: None,
                actor: None,
                sessions: 0,
                chunks: 0,
                categories: 0,
                logs: 0,
                size_bytes: 0,
                malformed: Vec::new(),
                malformed_lines: None,
                pending_staging: Vec::new(),
                ledger: None,
                index: None,
                read_only: self.read_only(),
                notices: self.notices(),
                access: None,
                conflicts: Vec::new(),
                last_sync: None,
                stale: None,
            });
        };
        // Status answers for every note, whenever the last check was.
        self.scan(inner, std::time::Duration::ZERO)?;
        let cats = inner.ledger.categories()?;
        let live: Vec<_> = cats
            .iter()
            .filter(|r| r.status != CategoryStatus::Deleted && read(&r.name))
            .collect();
        let segs = inner.ledger.segments()?;
        // A session is a session once it holds a chunk (an empty segment left by a crash is not).
        let mut sessions: Vec<&str> = segs
            .iter()
            .filter(|s| s.chunks > 0)
            .map(|s| s.session_id.as_str())
            .collect();
        sessions.sort();
        sessions.dedup();
        let size: u64 = walk_size(&self.layout.root);
        let mut status = memdir_api::StatusResponse {
            dir: root,
            dir_source: self.settings.dir_source.clone(),
            exists: true,
            replica: self.current_replica(),
            actor: Some(self.actor()),
            sessions: sessions.len(),
            chunks: segs.iter().map(|s| s.chunks).sum::<i64>(),
            categories: live.len(),
            logs: live.iter().filter(|r| r.kind == "log").count(),
            size_bytes: size,
            malformed: live
                .iter()
                .filter(|r| r.status == CategoryStatus::Malformed)
                .map(|r| r.name.clone())
                .collect(),
            malformed_lines: Some(
                segs.iter()
                    .filter(|s| s.bad_lines > 0)
                    .map(|s| json!({"segment": s.rel, "lines": s.bad_lines}))
                    .collect(),
            ),
            pending_staging: memdir_store::recovery::pending(&self.layout.staging()),
            ledger: Some(
                json!({"transactions": inner.ledger.txn_count()?, "generation": inner.ledger.generation()?}),
            ),
            index: Some(self.index_state(inner)?),
            read_only: self.read_only(),
            notices: self.notices(),
            access: None,
            conflicts: self.replication().open_conflicts()?,
            last_sync: self.replication().last_sync(),
            stale: None,
        };
        drop(guard);
        status.stale = Some(self.categories().stale(memdir_api::STALE_DAYS, read)?.len());
        Ok(status)
    }

    /// The index's state from its commit metadata, without opening it.
    fn index_state(&self, inner: &Inner) -> Result<Value> {
        let generation = inner
            .ledger
            .last_change_of(&[ChangeKind::Append, ChangeKind::Segment])?;
        let cat_generation = inner.ledger.last_change_of(&[ChangeKind::Category])?;
        let epoch = inner.ledger.meta("epoch")?.unwrap_or_default();
        let payload = |part: &str| -> Option<memdir_index::index::Payload> {
            let meta: Value = serde_json::from_slice(
                &std::fs::read(self.layout.index_dir().join(part).join("meta.json")).ok()?,
            )
            .ok()?;
            serde_json::from_str(meta.get("payload")?.as_str()?).ok()
        };
        let (pc, pg) = (payload("chunks"), payload("categories"));
        let state = match (&pc, &pg) {
            (Some(c), Some(g))
                if c.epoch == epoch
                    && g.epoch == epoch
                    && c.generation >= generation
                    && g.generation >= cat_generation =>
            {
                "current"
            }
            (Some(_), Some(_)) => "behind (caught up by the next search)",
            _ => "missing (built by the next search or memdir reindex)",
        };
        Ok(json!({
            "state": state,
            "generation": pc.as_ref().map(|p| p.generation),
            "size_bytes": walk_size(&self.layout.index_dir()),
        }))
    }
}

fn walk_size(root: &Path) -> u64 {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}
