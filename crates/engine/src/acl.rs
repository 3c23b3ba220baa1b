//! Access control: which device may read, write, ingest and destroy what.
//!
//! The policy comes from the config file's `[acl]` section ([`Acl`], parsed by
//! the binary's `config`); a [`Caller`] is one device acting under it. Every surface builds a
//! caller (the CLI and MCP over stdio: the configured device; REST and MCP over HTTP: the
//! device its bearer token maps to) and hands it to [`crate::ops::call`], the one place where
//! the policy is evaluated. This module decides; it does no I/O and knows no surface.
//!
//! Without an `[acl]` section every device may do everything (the single-user default). With
//! one, in this order:
//!
//! 1. an admin device (`admin_devices`) may do everything;
//! 2. `meta` and `usage_stats` are reserved, and `base`, `infrastructure`, `projects`,
//!    `workflow_global`, `nodes` and `ecosystem` need an admin: no rule grants them;
//! 3. a registered device (`device_categories`) may write the category named after itself and
//!    `workflow_<itself>`, a registered device named `<p>-agent` every category starting with
//!    `<p>_`, and it may ingest into any project;
//! 4. `[[acl.rules]]` grant a device (a name or a glob) reads, writes and ingest projects by
//!    name or glob (`{device}` stands for the device's name), and `delete = true` the
//!    destructive operations (delete, restore, compact);
//! 5. anything else is denied (fail closed). Reads default to every category.
//!
//! A denied operation is a [`ErrorKind::Forbidden`] error that names the rule and changes
//! nothing; a category the device may not read is absent from its lists, searches and context
//! reads.

use std::sync::Arc;

use serde_json::Value;

use memdir_api::error::{Error, ErrorKind, Result};
use memdir_store::note::NotePath;

/// Categories only an admin device may write (the earlier design's shared documents).
pub const ADMIN_ONLY: &[&str] = &[
    "base",
    "infrastructure",
    "projects",
    "workflow_global",
    "nodes",
    "ecosystem",
];

/// Categories memdir keeps for itself: no device but an admin writes them.
pub const RESERVED: &[&str] = &["meta", "usage_stats"];

/// An explicit grant (`[[acl.rules]]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The device it applies to: a name or a glob.
    pub device: String,
    /// Categories it may read (names or globs); `None`: every one.
    pub read: Option<Vec<String>>,
    /// Categories it may write.
    pub write: Vec<String>,
    /// Projects it may ingest into; `None`: what its registration gives.
    pub ingest: Option<Vec<String>>,
    /// Delete, restore and compact (and the other destructive operations).
    pub delete: bool,
}

/// The policy of the `[acl]` section.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acl {
    pub admin_devices: Vec<String>,
    /// Registered devices (the earlier design's `device_categories`).
    pub device_categories: Vec<String>,
    pub rules: Vec<Rule>,
}

/// What a caller is to the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// No `[acl]` section: everything is allowed.
    Open,
    /// Everything is allowed: an admin device, or the single HTTP token.
    Admin,
    /// Listed in `device_categories`.
    Registered,
    /// Neither: only what rules grant.
    Unknown,
}

impl Role {
    fn label(self) -> &'static str {
        match self {
            Role::Open => "open",
            Role::Admin => "admin",
            Role::Registered => "registered",
            Role::Unknown => "unregistered",
        }
    }
}

/// What one agent session's memory-tool `view`s showed of each memory file: the hash of the
/// text, by note path. Kept by the surface per session (an MCP session), carried on its
/// [`Caller`]; the session's own edits keep it current.
#[derive(Debug, Default)]
pub struct Views(std::sync::Mutex<std::collections::HashMap<String, String>>);

impl Views {
    fn map(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, String>> {
        // A panic elsewhere while holding it leaves a map that is still whole.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The hash the session last saw of `path`, if it viewed (or wrote) it.
    pub(crate) fn seen(&self, path: &NotePath) -> Option<String> {
        self.map().get(path.as_str()).cloned()
    }

    /// Records what the session now knows `path` holds (`None`: nothing known).
    pub(crate) fn saw(&self, path: &NotePath, hash: Option<&str>) {
        match hash {
            Some(h) => self.map().insert(path.to_string(), h.to_string()),
            None => self.map().remove(path.as_str()),
        };
    }

    /// Forgets `path` and everything under it (a delete).
    pub(crate) fn forget_under(&self, path: &NotePath) {
        let dir = format!("{path}/");
        self.map()
            .retain(|k, _| k != path.as_str() && !k.starts_with(&dir));
    }

    /// Moves what is known of `from` and everything under it to `to` (a rename).
    pub(crate) fn move_under(&self, from: &NotePath, to: &NotePath) {
        let dir = format!("{from}/");
        let mut map = self.map();
        let moved: Vec<(String, String)> = map
            .iter()
            .filter(|(k, _)| *k == from.as_str() || k.starts_with(&dir))
            .map(|(k, v)| (format!("{to}{}", &k[from.as_str().len()..]), v.clone()))
            .collect();
        map.retain(|k, _| k != from.as_str() && !k.starts_with(&dir));
        map.extend(moved);
    }
}

/// One device acting under a policy.
#[derive(Clone, Debug)]
pub struct Caller {
    /// The device's name: also the actor recorded on its writes.
    pub device: String,
    acl: Option<Arc<Acl>>,
    /// Admin whatever the policy says (the single HTTP token).
    admin: bool,
    /// Reached memdir over the network (REST, MCP over HTTP), not as the user who runs it.
    network: bool,
    /// What this caller's session saw of each memory file (MCP sessions keep one).
    views: Option<Arc<Views>>,
}

/// A denial: the message and the rule that decided.
struct Denial {
    message: String,
    rule: String,
}

type Verdict = std::result::Result<(), Denial>;

/// Whether `name` matches `pattern`, where `*` stands for any run of characters and `?` for
/// one, and `{device}` for `device`.
pub fn matches(pattern: &str, name: &str, device: &str) -> bool {
    let p = pattern.replace("{device}", device);
    glob(p.as_bytes(), name.as_bytes())
}

fn glob(p: &[u8], s: &[u8]) -> bool {
    // Iterative wildcard matching with backtracking to the last `*`.
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Checks a pattern of the config file: a name or glob of name characters, or `notes/` and
/// a glob of a note's path (`notes/team/*`).
pub fn check_pattern(p: &str) -> std::result::Result<(), String> {
    let bare = p.replace("{device}", "d");
    if bare.is_empty() {
        return Err("an empty pattern matches nothing; leave it out".into());
    }
    let (slash_ok, body) = match bare.strip_prefix("notes/") {
        Some(rest) => (true, rest.to_string()),
        None => (false, bare.clone()),
    };
    if let Some(c) = body.chars().find(|c| {
        !(c.is_alphanumeric()
            || matches!(c, '_' | '-' | '.' | '*' | '?' | ' ')
            || (slash_ok && *c == '/'))
    }) {
        return Err(format!(
            "{p:?} holds {c:?}: a pattern is made of name characters, `*`, `?` and {{device}} (or is notes/ and a note path's glob)"
        ));
    }
    Ok(())
}

impl Caller {
    /// `device` under `acl` (`None`: no `[acl]` section).
    pub fn new(device: impl Into<String>, acl: Option<Arc<Acl>>) -> Caller {
        Caller {
            device: device.into(),
            acl,
            admin: false,
            network: false,
            views: None,
        }
    }

    /// `device` with every right (the single HTTP token).
    pub fn admin(device: impl Into<String>, acl: Option<Arc<Acl>>) -> Caller {
        Caller {
            device: device.into(),
            acl,
            admin: true,
            network: false,
            views: None,
        }
    }

    /// The same caller, reaching memdir over the network: whatever its rights, it may not
    /// choose where memdir sends a secret of the process that serves it (a sync token).
    pub fn from_network(self) -> Caller {
        Caller {
            network: true,
            ..self
        }
    }

    /// The same caller within a session that remembers what its memory-tool `view`s showed,
    /// so its edits of a file it viewed are compare-and-swaps against that view.
    pub fn with_views(self, views: Arc<Views>) -> Caller {
        Caller {
            views: Some(views),
            ..self
        }
    }

    /// The session's memory of memory-tool views, if it keeps one.
    pub(crate) fn views(&self) -> Option<&Views> {
        self.views.as_deref()
    }

    /// Whether the caller reached memdir over the network.
    pub fn is_from_network(&self) -> bool {
        self.network
    }

    /// The caller's role.
    pub fn role(&self) -> Role {
        match &self.acl {
            None => Role::Open,
            Some(_) if self.admin => Role::Admin,
            Some(a) if a.admin_devices.iter().any(|d| d == &self.device) => Role::Admin,
            Some(a) if a.device_categories.iter().any(|d| d == &self.device) => Role::Registered,
            Some(_) => Role::Unknown,
        }
    }

    fn unrestricted(&self) -> bool {
        matches!(self.role(), Role::Open | Role::Admin)
    }

    /// The rules that apply to this device, with their index in the file.
    fn rules(&self) -> impl Iterator<Item = (usize, &Rule)> {
        self.acl
            .iter()
            .flat_map(|a| a.rules.iter().enumerate())
            .filter(|(_, r)| matches(&r.device, &self.device, &self.device))
    }

    fn deny(&self, message: String, rule: impl Into<String>) -> Verdict {
        Err(Denial {
            message,
            rule: rule.into(),
        })
    }

    /// Whether this device may read category `name`.
    pub fn can_read(&self, name: &str) -> bool {
        self.read(name).is_ok()
    }

    fn read(&self, name: &str) -> Verdict {
        if self.unrestricted() {
            return Ok(());
        }
        let mut any = false;
        for (_, r) in self.rules() {
            any = true;
            match &r.read {
                None => return Ok(()),
                Some(globs) if globs.iter().any(|g| matches(g, name, &self.device)) => {
                    return Ok(());
                }
                Some(_) => {}
            }
        }
        if !any {
            return Ok(());
        }
        self.deny(
            format!(
                "device {:?} may not read category {name:?}: no `read` pattern of its [[acl.rules]] matches it",
                self.device
            ),
            "acl.rules.read",
        )
    }

    /// Whether this device reads every category (health reports name any file).
    fn read_all(&self) -> Verdict {
        if self.unrestricted() {
            return Ok(());
        }
        let mut any = false;
        for (_, r) in self.rules() {
            any = true;
            match &r.read {
                None => return Ok(()),
                Some(globs) if globs.iter().any(|g| g == "*") => return Ok(()),
                Some(_) => {}
            }
        }
        if !any {
            return Ok(());
        }
        self.deny(
            format!(
                "device {:?} may read only some categories, and this report names every file of the store",
                self.device
            ),
            "acl.rules.read",
        )
    }

    fn write(&self, name: &str) -> Verdict {
        if self.unrestricted() {
            return Ok(());
        }
        let d = &self.device;
        if RESERVED.contains(&name) {
            return self.deny(
                format!("device {d:?} may not write category {name:?}: it is reserved for memdir, and only an admin device writes it"),
                "acl.reserved",
            );
        }
        if ADMIN_ONLY.contains(&name) {
            return self.deny(
                format!("device {d:?} may not write category {name:?}: it needs an admin device, and {d:?} is not in admin_devices"),
                "acl.admin_devices",
            );
        }
        if self.role() == Role::Registered {
            if name == d || name.strip_prefix("workflow_") == Some(d.as_str()) {
                return Ok(());
            }
            if let Some(p) = d.strip_suffix("-agent")
                && !p.is_empty()
                && name.starts_with(&format!("{p}_"))
            {
                return Ok(());
            }
        }
        for (_, r) in self.rules() {
            if r.write.iter().any(|g| matches(g, name, d)) {
                return Ok(());
            }
        }
        let registered = if self.role() == Role::Registered {
            format!(
                "; a registered device writes only {d:?}, \"workflow_{d}\"{} and what [[acl.rules]] grant",
                d.strip_suffix("-agent")
                    .filter(|p| !p.is_empty())
                    .map(|p| format!(" and \"{p}_*\""))
                    .unwrap_or_default()
            )
        } else {
            "; it is not in device_categories or admin_devices".to_string()
        };
        self.deny(
            format!("device {d:?} may not write category {name:?}: no rule grants it{registered}"),
            "acl.rules.write",
        )
    }

    fn destroy(&self, what: &str) -> Verdict {
        if self.unrestricted() || self.rules().any(|(_, r)| r.delete) {
            return Ok(());
        }
        self.deny(
            format!(
                "device {:?} may not {what}: that needs an admin device or a rule with delete = true",
                self.device
            ),
            "acl.rules.delete",
        )
    }

    fn ingest(&self, project: &str) -> Verdict {
        if self.unrestricted() {
            return Ok(());
        }
        let mut listed = false;
        for (_, r) in self.rules() {
            if let Some(globs) = &r.ingest {
                listed = true;
                if globs.iter().any(|g| matches(g, project, &self.device)) {
                    return Ok(());
                }
            }
        }
        if !listed && self.role() == Role::Registered {
            return Ok(());
        }
        let shown = if project.is_empty() {
            "without a project".to_string()
        } else {
            format!("into project {project:?}")
        };
        self.deny(
            format!(
                "device {:?} may not ingest {shown}: {}",
                self.device,
                if listed {
                    "no `ingest` pattern of its [[acl.rules]] matches"
                } else {
                    "it is not a registered device (device_categories) and no rule grants it ingest"
                }
            ),
            "acl.rules.ingest",
        )
    }

    /// Checks what a request needs; `names` lists the store's categories (asked only when an
    /// operation touches all of them).
    pub fn admit(&self, need: &Need, names: &dyn Fn() -> Result<Vec<String>>) -> Result<()> {
        let verdict = match need {
            Need::Nothing => Ok(()),
            Need::ReadAll => self.read_all(),
            Need::Read(c) => self.read(c),
            Need::Write(c) => self.write(c),
            Need::Ingest(projects) => projects.iter().try_for_each(|p| self.ingest(p)),
            Need::Notes { write, paths } => paths.iter().try_for_each(|p| {
                let name = format!("notes/{}", p.trim_matches('/'));
                if *write {
                    self.write(&name)
                } else {
                    self.read(&name)
                }
            }),
            Need::Privileged(what) => self.destroy(what),
            Need::Admin { what } => {
                if self.unrestricted() {
                    Ok(())
                } else {
                    self.deny(
                        format!(
                            "device {:?} may not {what}: that needs an admin device",
                            self.device
                        ),
                        "acl.admin_devices",
                    )
                }
            }
            Need::Destroy { what, category } => self.destroy(what).and_then(|()| match category {
                Some(c) => self.write(c),
                None if self.unrestricted() => Ok(()),
                None => names()
                    .map_err(|e| Denial {
                        message: e.message,
                        rule: "acl".into(),
                    })?
                    .iter()
                    .try_for_each(|c| self.write(c)),
            }),
        };
        verdict.map_err(|d| {
            Error::new(ErrorKind::Forbidden, d.message)
                .detail("device", Value::from(self.device.clone()))
                .detail("rule", Value::from(d.rule))
                .hint("`memdir config show` prints the access-control list in effect; an admin device may do this")
        })
    }

    /// What `status` says about access control.
    pub fn describe(&self) -> memdir_api::AccessInfo {
        let role = self.role();
        let summary = match role {
            Role::Open => "no [acl] section: every device may do everything".to_string(),
            Role::Admin => format!("device {:?} is an admin: it may do everything", self.device),
            Role::Registered => format!(
                "device {:?} is registered: it writes its own categories and what rules grant",
                self.device
            ),
            Role::Unknown => format!(
                "device {:?} is not registered: it writes and ingests only what rules grant",
                self.device
            ),
        };
        memdir_api::AccessInfo {
            enabled: self.acl.is_some(),
            device: self.device.clone(),
            role: role.label().to_string(),
            summary,
        }
    }

    /// Whether reads are restricted at all (lists and searches need filtering).
    pub fn restricts_reads(&self) -> bool {
        !self.unrestricted() && self.rules().any(|(_, r)| r.read.is_some())
    }
}

/// What an operation's request touches.
#[derive(Debug)]
pub enum Need<'a> {
    /// Nothing guarded (session reads, status, maintenance of derived data).
    Nothing,
    /// A report that names every category.
    ReadAll,
    Read(&'a str),
    Write(&'a str),
    /// Ingest into these projects (`""`: no project).
    Ingest(Vec<&'a str>),
    /// Notes (or folders of notes) by path below `notes/`: read them, or change them too.
    /// Rules name them `notes/<path>` (`notes/projects/*`), beside the categories.
    Notes {
        write: bool,
        paths: Vec<&'a str>,
    },
    /// An operation reserved to admins and devices with `delete = true` (import, sync, ...).
    Privileged(&'static str),
    /// A destructive operation on one category, or on every one.
    Destroy {
        what: &'static str,
        category: Option<&'a str>,
    },
    /// An operation on the whole store that no rule can narrow (sync moves every category
    /// and session both ways): admin devices only.
    Admin {
        what: &'static str,
    },
}

/// A response whose hidden categories a caller must not see.
pub trait Visible {
    fn hide(&mut self, caller: &Caller);
}

// ---------------------------------------------------------------------------------------------
// What a response hides from a caller that may not read every category (each operation's
// need is in its entry of the operation table).
// ---------------------------------------------------------------------------------------------

mod responses {
    use super::*;
    use memdir_api::*;

    impl Visible for SearchResponse {
        fn hide(&mut self, c: &Caller) {
            self.results.retain(|h| match h {
                SearchHit::Category { category, .. } => c.can_read(category),
                SearchHit::Chunk { .. } => true,
                SearchHit::Note { path, .. } => c.can_read(&format!("notes/{path}")),
            });
            self.count = self.results.len();
        }
    }

    impl Visible for ListResponse {
        fn hide(&mut self, c: &Caller) {
            self.categories.retain(|s| c.can_read(&s.name));
            self.count = self.categories.len();
        }
    }

    impl Visible for ContextResponse {
        fn hide(&mut self, c: &Caller) {
            let hidden: Vec<String> = self
                .categories
                .keys()
                .chain(self.errors.keys())
                .filter(|n| !c.can_read(n))
                .cloned()
                .collect();
            for n in hidden {
                self.categories.remove(&n);
                self.errors.remove(&n);
                self.missing.push(n);
            }
            self.missing.sort();
        }
    }

    impl Visible for StatusResponse {
        fn hide(&mut self, c: &Caller) {
            // The counts are the engine's, over readable categories only (`status_as`).
            self.malformed.retain(|n| c.can_read(n));
            self.conflicts.retain(|o| c.can_read(&o.category));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl() -> Arc<Acl> {
        Arc::new(Acl {
            admin_devices: vec!["laptop".into()],
            device_categories: vec!["laptop".into(), "phone".into(), "web-agent".into()],
            rules: vec![Rule {
                device: "phone".into(),
                read: Some(vec!["notes_*".into(), "phone".into()]),
                write: vec!["notes_*".into(), "workflow_{device}".into()],
                ingest: Some(vec!["mobile".into()]),
                delete: false,
            }],
        })
    }

    fn admit(c: &Caller, need: Need) -> std::result::Result<(), String> {
        c.admit(&need, &|| Ok(vec!["a".into(), "notes_x".into()]))
            .map_err(|e| e.details["rule"].as_str().unwrap().to_string())
    }

    #[test]
    fn globs_match_names() {
        assert!(matches("notes_*", "notes_a", "d"));
        assert!(matches("*", "", "d"));
        assert!(matches("a?c", "abc", "d"));
        assert!(!matches("a?c", "ac", "d"));
        assert!(matches("workflow_{device}", "workflow_phone", "phone"));
        assert!(!matches("workflow_{device}", "workflow_laptop", "phone"));
        assert!(matches("*_*_x", "a_b_c_x", "d"));
        assert!(!matches("notes_*", "note", "d"));
    }

    #[test]
    fn without_a_policy_everything_is_allowed() {
        let c = Caller::new("anything", None);
        assert_eq!(c.role(), Role::Open);
        assert!(admit(&c, Need::Write("base")).is_ok());
        assert!(
            admit(
                &c,
                Need::Destroy {
                    what: "delete",
                    category: None
                }
            )
            .is_ok()
        );
    }

    #[test]
    fn admins_do_everything_and_the_earlier_rules_hold_for_registered_devices() {
        let a = acl();
        let laptop = Caller::new("laptop", Some(a.clone()));
        assert!(admit(&laptop, Need::Write("base")).is_ok());
        assert!(admit(&laptop, Need::Write("meta")).is_ok());
        let agent = Caller::new("web-agent", Some(a.clone()));
        assert!(admit(&agent, Need::Write("web_notes")).is_ok());
        assert!(admit(&agent, Need::Write("web-agent")).is_ok());
        assert!(admit(&agent, Need::Write("workflow_web-agent")).is_ok());
        assert_eq!(
            admit(&agent, Need::Write("base")).unwrap_err(),
            "acl.admin_devices"
        );
        assert_eq!(
            admit(&agent, Need::Write("meta")).unwrap_err(),
            "acl.reserved"
        );
        assert_eq!(
            admit(&agent, Need::Write("other")).unwrap_err(),
            "acl.rules.write"
        );
        assert!(admit(&agent, Need::Ingest(vec!["any", ""])).is_ok());
        assert!(admit(&agent, Need::Read("anything")).is_ok());
    }

    #[test]
    fn rules_grant_reads_writes_and_projects() {
        let phone = Caller::new("phone", Some(acl()));
        assert!(admit(&phone, Need::Write("notes_a")).is_ok());
        assert!(admit(&phone, Need::Write("workflow_phone")).is_ok());
        assert!(admit(&phone, Need::Read("notes_a")).is_ok());
        assert_eq!(
            admit(&phone, Need::Read("secret")).unwrap_err(),
            "acl.rules.read"
        );
        assert_eq!(admit(&phone, Need::ReadAll).unwrap_err(), "acl.rules.read");
        assert!(admit(&phone, Need::Ingest(vec!["mobile"])).is_ok());
        assert_eq!(
            admit(&phone, Need::Ingest(vec!["work"])).unwrap_err(),
            "acl.rules.ingest"
        );
        assert_eq!(
            admit(
                &phone,
                Need::Destroy {
                    what: "delete",
                    category: Some("notes_a")
                }
            )
            .unwrap_err(),
            "acl.rules.delete"
        );
        assert!(phone.restricts_reads());
    }

    #[test]
    fn unknown_devices_are_denied_writes_and_ingest_but_read() {
        let x = Caller::new("stranger", Some(acl()));
        assert_eq!(x.role(), Role::Unknown);
        assert_eq!(
            admit(&x, Need::Write("stranger")).unwrap_err(),
            "acl.rules.write"
        );
        assert_eq!(
            admit(&x, Need::Ingest(vec!["p"])).unwrap_err(),
            "acl.rules.ingest"
        );
        assert!(admit(&x, Need::Read("base")).is_ok());
        let admin = Caller::admin("stranger", Some(acl()));
        assert!(admit(&admin, Need::Write("base")).is_ok());
    }

    #[test]
    fn destroying_everything_needs_write_on_every_category() {
        let mut a = (*acl()).clone();
        a.rules[0].delete = true;
        let phone = Caller::new("phone", Some(Arc::new(a)));
        // "a" is not writable by the phone, "notes_x" is.
        assert_eq!(
            admit(
                &phone,
                Need::Destroy {
                    what: "compact",
                    category: None
                }
            )
            .unwrap_err(),
            "acl.rules.write"
        );
        assert!(
            admit(
                &phone,
                Need::Destroy {
                    what: "delete",
                    category: Some("notes_x")
                }
            )
            .is_ok()
        );
    }

    #[test]
    fn patterns_are_checked() {
        assert!(check_pattern("notes_*").is_ok());
        assert!(check_pattern("workflow_{device}").is_ok());
        assert!(check_pattern("").is_err());
        assert!(check_pattern("../x").is_err());
    }
}
