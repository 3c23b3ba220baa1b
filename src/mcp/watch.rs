//! Resource subscriptions: a client subscribed to a category or a session hears
//! `notifications/resources/updated` when it changes, whoever changed it.
//!
//! The files are the truth and any process (another server, the CLI, a sync, a hand edit)
//! may change them, so a subscription watches the files rather than this server's own
//! writes: every [`POLL`] a connection's watcher takes the size and change stamp of each
//! subscribed memory's files (a category's file, a session's segments) and announces the URIs
//! whose stamps moved. A stat per file per poll, and nothing at all without subscriptions.
//!
//! Both protocol generations are served: `resources/subscribe` / `resources/unsubscribe`
//! (up to 2025-11-25; one watcher per connection) and `subscriptions/listen` (2026-07-28;
//! one watcher per listen request, ended by its cancellation). Only categories and sessions
//! can be subscribed to: a version never changes, and the status changes with every write.
//! The access list applies as to a read: a category the caller may not read is refused at
//! subscribe, and a session is announced only while the caller may fetch it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;

use memdir_api::error::{Error, ErrorKind};
use memdir_api::uri::{self, Resource as Uri};
use memdir_engine::acl::Caller;
use memdir_engine::ops;
use memdir_engine::service::Memdir;
use memdir_store::model::{CategoryName, SessionId};
use memdir_store::{Layout, list_segments, stat};

/// How often a watcher looks at the files.
pub const POLL: Duration = Duration::from_millis(250);

/// What a subscribed URI names.
#[derive(Clone, Debug)]
enum Target {
    Category(CategoryName),
    Session(SessionId),
}

/// The size and change stamp of each file of a memory (absent files leave no entry).
type Stamp = Vec<(String, u64, i64)>;

/// One subscription: what it names, who asked, and the files as last seen.
struct Sub {
    target: Target,
    caller: Caller,
    seen: Stamp,
}

/// The subscriptions of one connection (or one listen request).
#[derive(Default)]
pub struct Watcher {
    subs: BTreeMap<String, Sub>,
    /// Whether a task polls this watcher (`resources/subscribe`: one per connection).
    pub polling: bool,
}

/// What `uri` names, if it is a memory that can be subscribed to.
fn target(at: &str) -> Result<Target, Error> {
    let refused = |why: &str| {
        Error::new(
            ErrorKind::Invalid,
            format!("cannot subscribe to {at:?}: {why}"),
        )
        .hint("subscribe to memdir://categories/{name} or memdir://sessions/{session_id}")
    };
    match uri::parse(at) {
        Some(Uri::Category { name }) => CategoryName::new(&name)
            .map(Target::Category)
            .map_err(|e| refused(&e.message)),
        Some(Uri::Session { session_id, .. }) => SessionId::new(&session_id)
            .map(Target::Session)
            .map_err(|e| refused(&e.message)),
        Some(_) => Err(refused(
            "only categories and sessions change; a version or a chunk stays as it is read, and the status changes with every write",
        )),
        None => Err(refused("not a memdir resource URI")),
    }
}

/// Whether `uri` names something a subscription can watch (the listen filter's check).
pub fn watchable(at: &str) -> bool {
    target(at).is_ok()
}

fn stamp(layout: &Layout, target: &Target) -> Stamp {
    let one = |rel: std::path::PathBuf| {
        stat(&layout.root.join(&rel))
            .ok()
            .flatten()
            .map(|(len, ns)| (rel.display().to_string(), len, ns))
    };
    match target {
        Target::Category(name) => one(Layout::category_rel(name)).into_iter().collect(),
        Target::Session(id) => list_segments(layout, &Layout::session_rel(id))
            .map(|segs| {
                segs.into_iter()
                    .map(|s| (s.rel.display().to_string(), s.len, s.mtime_ns))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Whether `caller` may read what `target` names now.
fn may_read(m: &Memdir, caller: &Caller, target: &Target) -> bool {
    match target {
        Target::Category(name) => caller.can_read(name.as_str()),
        Target::Session(id) => {
            let op = ops::find("fetch").expect("invariant: fetch is in the table");
            let args = json!({"session_id": id.as_str(), "limit": 1});
            match ops::call(m, caller, op, args) {
                Ok(_) => true,
                // A session with no chunks yet: announced once it has some.
                Err(e) => e.kind == ErrorKind::NotFound && !caller.restricts_reads(),
            }
        }
    }
}

impl Watcher {
    /// Adds a subscription for `caller`; refused for what cannot change or may not be read.
    pub fn subscribe(&mut self, m: &Memdir, caller: &Caller, at: &str) -> Result<(), Error> {
        let target = target(at)?;
        if let Target::Category(name) = &target
            && !caller.can_read(name.as_str())
        {
            return Err(Error::new(
                ErrorKind::Forbidden,
                format!("this device may not read category {:?}", name.as_str()),
            ));
        }
        let seen = stamp(m.layout(), &target);
        self.subs.insert(
            at.to_string(),
            Sub {
                target,
                caller: caller.clone(),
                seen,
            },
        );
        Ok(())
    }

    /// Drops a subscription; unsubscribing from what was never subscribed to is no error.
    pub fn unsubscribe(&mut self, at: &str) {
        self.subs.remove(at);
    }

    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    /// The subscribed URIs whose files changed since the last look, each only while its
    /// subscriber may still read it.
    pub fn changed(&mut self, m: &Memdir) -> Vec<String> {
        let mut out = Vec::new();
        for (at, sub) in &mut self.subs {
            let now = stamp(m.layout(), &sub.target);
            if now != sub.seen {
                sub.seen = now;
                if may_read(m, &sub.caller, &sub.target) {
                    out.push(at.clone());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_categories_and_sessions_can_be_watched() {
        assert!(watchable("memdir://categories/prefs"));
        assert!(watchable("memdir://sessions/s1"));
        assert!(watchable("memdir://sessions/a%2Fb"));
        for at in [
            "memdir://status",
            "memdir://categories/prefs/versions/2",
            "memdir://sessions/s1/3",
            "memdir://elsewhere",
            "https://example.com/x",
            "memdir://categories/..",
        ] {
            assert!(!watchable(at), "{at}");
            let e = target(at).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Invalid, "{at}");
            assert!(
                e.message.contains("cannot subscribe"),
                "{at}: {}",
                e.message
            );
        }
    }
}
