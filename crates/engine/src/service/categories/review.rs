//! Reviews: a category, one of its keys or a session chunk marked as checked and still right,
//! and what is stale (the categories neither written nor reviewed for some days).
//!
//! Reviews are kept in the category `_reviews` (`memdir_api::REVIEWS_CATEGORY`), one top-level
//! key per thing reviewed (`category:NAME`, `category:NAME/KEY`, `chunk:URI`) holding
//! `{at, by, note}`: a review is a merge write of that category, so it is versioned, synced
//! (two devices' reviews of different things merge key by key; of the same thing, the later
//! wins), readable and editable like any category. The file is read leniently where reviews
//! only decorate an answer (a search hit's `reviewed_at`): a hand edit that broke it hides
//! reviews there, and a review or `--stale` reports it.

use serde_json::{Map, Value, json};

use crate::service::Categories;
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::{
    REVIEWS_CATEGORY, ReadRequest, Review, ReviewRequest, ReviewResponse, SearchHit, StaleCategory,
    WriteRequest,
};
use memdir_store::clock;

const DAY_MS: i64 = 86_400_000;

impl Categories<'_> {
    /// Records a review, or with `stale` lists the categories `can_read` allows that were
    /// neither written nor reviewed in that many days.
    pub fn review(
        &self,
        req: &ReviewRequest,
        can_read: &dyn Fn(&str) -> bool,
    ) -> Result<ReviewResponse> {
        if let Some(days) = req.stale {
            if req.category.is_some() || req.key.is_some() || req.chunk.is_some() {
                return Err(Error::invalid(
                    "stale",
                    "stale lists what is stale: give it without a category, key or chunk",
                ));
            }
            return Ok(ReviewResponse {
                reviewed: None,
                stale: Some(self.stale(days, can_read)?),
            });
        }
        let note =
            crate::service::check_reason(req.note.as_deref()).map_err(|e| e.field("note"))?;
        let target = match (&req.category, &req.key, &req.chunk) {
            (Some(c), key, None) => self.category_target(c, key.as_deref())?,
            (None, None, Some(uri)) => self.chunk_target(uri)?,
            (None, Some(_), _) => {
                return Err(Error::invalid(
                    "key",
                    "key needs the category it belongs to",
                ));
            }
            (Some(_), _, Some(_)) => {
                return Err(Error::invalid(
                    "chunk",
                    "review a category or a chunk, not both",
                ));
            }
            (None, None, None) => {
                return Err(Error::invalid(
                    "category",
                    "review needs a category (or a chunk's uri), or stale to list what is stale",
                ));
            }
        };
        let at = clock::rfc3339(clock::now_ms());
        let by = self.call().actor.clone();
        let mut entry = json!({"at": at, "by": by});
        if let Some(n) = &note {
            entry["note"] = Value::from(n.as_str());
        }
        self.write(&WriteRequest {
            category: REVIEWS_CATEGORY.to_string(),
            data: json!({ target.clone(): entry }),
            reason: Some(format!("review {target}")),
            expected_hash: None,
            merge: true,
        })?;
        Ok(ReviewResponse {
            reviewed: Some(Review {
                target,
                reviewed_at: at,
                reviewed_by: by,
                note,
            }),
            stale: None,
        })
    }

    /// The reviews key of an existing category, or of an existing top-level key of it.
    fn category_target(&self, name: &str, key: Option<&str>) -> Result<String> {
        if name == REVIEWS_CATEGORY {
            return Err(Error::invalid(
                "category",
                "the reviews category keeps reviews; it is not reviewed itself",
            ));
        }
        let read = self.read(&ReadRequest {
            category: name.to_string(),
            ..ReadRequest::default()
        })?;
        let Some(key) = key else {
            return Ok(format!("category:{name}"));
        };
        if read.data.get(key).is_none() {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("category {name:?} has no top-level key {key:?}"),
            )
            .field("key")
            .hint("{op:read} shows the category's keys"));
        }
        Ok(format!("category:{name}/{key}"))
    }

    /// The reviews key of an existing, unforgotten session chunk, by its uri.
    fn chunk_target(&self, uri: &str) -> Result<String> {
        let Some(memdir_api::uri::Resource::Chunk {
            session_id,
            position,
        }) = memdir_api::uri::parse(uri)
        else {
            return Err(Error::invalid(
                "chunk",
                format!("{uri:?} is not a chunk's uri (memdir://sessions/SESSION/POSITION)"),
            ));
        };
        let chunks = self.sessions().session_chunks(&session_id)?;
        match chunks.get(position as usize) {
            Some(c) if !c.chunk.is_tombstone() => Ok(format!(
                "chunk:{}",
                memdir_api::uri::chunk(&session_id, position)
            )),
            _ => Err(Error::new(
                ErrorKind::NotFound,
                format!("no chunk at position {position} of session {session_id:?}"),
            )
            .field("chunk")
            .hint("{op:fetch} shows a session's chunks")),
        }
    }

    /// Every review, by its key; none when the reviews category does not exist.
    fn reviews(&self) -> Result<Map<String, Value>> {
        match self.read(&ReadRequest {
            category: REVIEWS_CATEGORY.to_string(),
            ..ReadRequest::default()
        }) {
            Ok(r) => Ok(r.data.as_object().cloned().unwrap_or_default()),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(Map::new()),
            Err(e) => Err(e),
        }
    }

    /// The categories neither written nor reviewed (as a whole) in `days` days, the longest
    /// untouched first.
    pub(crate) fn stale(
        &self,
        days: u64,
        can_read: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<StaleCategory>> {
        let reviews = self.reviews()?;
        let now = clock::now_ms();
        let mut out: Vec<(i64, StaleCategory)> = Vec::new();
        for c in self.list()?.categories {
            if c.name == REVIEWS_CATEGORY || !can_read(&c.name) {
                continue;
            }
            let reviewed_at = review_time(&reviews, &format!("category:{}", c.name));
            let last = [
                clock::parse_time(&c.updated_at),
                reviewed_at.as_deref().and_then(clock::parse_time),
            ]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(0);
            let age = now.saturating_sub(last);
            if age >= days as i64 * DAY_MS {
                out.push((
                    last,
                    StaleCategory {
                        category: c.name,
                        updated_at: c.updated_at,
                        reviewed_at,
                        days: (age / DAY_MS) as u64,
                    },
                ));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.category.cmp(&b.1.category)));
        Ok(out.into_iter().map(|(_, s)| s).collect())
    }

    /// Gives each hit the time it was last reviewed: a chunk by its uri; a category hit by the
    /// later of its category's review and its top-level key's. A reviews category that cannot
    /// be read marks nothing.
    pub(crate) fn mark_reviewed(&self, hits: &mut [SearchHit]) {
        let file = memdir_store::model::CategoryName::new(REVIEWS_CATEGORY).map(|n| {
            self.layout()
                .root
                .join(memdir_store::Layout::category_rel(&n))
        });
        if hits.is_empty() || !file.is_ok_and(|f| f.exists()) {
            return;
        }
        let Ok(reviews) = self.reviews() else {
            return;
        };
        for h in hits {
            match h {
                SearchHit::Chunk {
                    uri, reviewed_at, ..
                } => *reviewed_at = review_time(&reviews, &format!("chunk:{uri}")),
                SearchHit::Category {
                    category,
                    key_path,
                    reviewed_at,
                    ..
                } => {
                    let top = key_path.split(['.', '[']).next().unwrap_or("");
                    *reviewed_at = [
                        review_time(&reviews, &format!("category:{category}")),
                        review_time(&reviews, &format!("category:{category}/{top}")),
                    ]
                    .into_iter()
                    .flatten()
                    .max();
                }
                SearchHit::Note { .. } => {}
            }
        }
    }
}

/// The time of the review kept under `target`, if it has one.
fn review_time(reviews: &Map<String, Value>, target: &str) -> Option<String> {
    reviews
        .get(target)
        .and_then(|r| r.get("at"))
        .and_then(Value::as_str)
        .map(str::to_string)
}
