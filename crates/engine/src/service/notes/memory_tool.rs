//! The memory-tool protocol on notes: the six commands of the client-side memory tool
//! (`view`, `create`, `str_replace`, `insert`, `delete`, `rename`) on paths under `/memories`,
//! which map onto `notes/` (`/memories/projects/orbital.md` is `notes/projects/orbital.md`).
//!
//! Results and errors are the strings the protocol's documentation gives, so a model that
//! knows the tool reads them as it expects. Each command runs as one note operation: every
//! edit is a versioned write under the store's lock, applied to the note as it is at that
//! moment, and `create` creates only. Within a session that keeps [`Views`] (an MCP session),
//! an edit of a file the session viewed is a compare-and-swap against the text that view
//! showed: another writer's change in between fails the edit clearly instead of being edited
//! over (an `insert` by line number would otherwise land on a shifted line).

use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::*;
use memdir_store::note::{self, NotePath};

use super::text;
use crate::acl::Views;
use crate::service::Notes;

/// The root every path of the protocol lies under.
pub const ROOT: &str = "/memories";

/// A view shows at most this many characters of a file at once; the rest is asked for with
/// `view_range`.
pub const MAX_VIEW_CHARS: usize = 16_000;

/// An answer of the protocol that is an error: its string, as the tool's result.
fn refuse(message: String) -> Error {
    Error::new(ErrorKind::Invalid, message)
}

fn refuse_as(kind: ErrorKind, message: String) -> Error {
    Error::new(kind, message)
}

/// Where a protocol path points: the store's top folder or a path below `notes/`.
enum Target {
    Root,
    Path(NotePath),
}

/// Maps a protocol path onto notes, refusing anything outside `/memories`.
fn target(path: &str) -> Result<Target> {
    let Some(rest) = path.strip_prefix(ROOT) else {
        return Err(refuse(format!(
            "Error: Path must start with {ROOT}, got: {path}"
        )));
    };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return Err(refuse(format!(
            "Error: Path must start with {ROOT}, got: {path}"
        )));
    }
    let rest = rest.trim_start_matches('/').trim_end_matches('/');
    let lower = rest.to_ascii_lowercase();
    let escapes = rest.split('/').any(|c| c == ".." || c == ".")
        || rest.contains('\\')
        || ["%2e", "%2f", "%5c", "%00"]
            .iter()
            .any(|e| lower.contains(e));
    if escapes {
        return Err(refuse_as(
            ErrorKind::Forbidden,
            format!("Error: Path {path} would escape {ROOT} directory"),
        ));
    }
    if rest.is_empty() {
        return Ok(Target::Root);
    }
    NotePath::new(rest)
        .map(Target::Path)
        .map_err(|e| refuse(format!("Error: Invalid path {path}: {}", e.message)))
}

/// A size as the protocol prints it: `0B`, `512B`, `4K`, `1.5K`, `2M` (powers of 1024, one
/// decimal unless whole).
pub fn size(n: u64) -> String {
    if n == 0 {
        return "0B".into();
    }
    let units = ["B", "K", "M", "G"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < units.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 {
        format!("{}{}", v as u64, units[u])
    } else {
        format!("{v:.1}{}", units[u])
    }
}

fn required<'r>(field: &'r Option<String>, name: &str, command: &str) -> Result<&'r str> {
    field.as_deref().ok_or_else(|| {
        refuse(format!(
            "Error: Parameter `{name}` is required for command: {command}"
        ))
    })
}

/// A file this session viewed was changed by another writer before the session's edit.
fn changed_since_view(path: &str) -> Error {
    refuse_as(
        ErrorKind::Conflict,
        format!(
            "Error: The file {path} has been changed by another writer since you last viewed it; nothing was changed. View it again, then retry the edit on what it holds now."
        ),
    )
}

/// Whether `e` is a compare-and-swap that lost.
fn lost_race(e: &Error) -> bool {
    e.kind == ErrorKind::Conflict && e.details.contains_key("current_hash")
}

fn missing(path: &str, full: bool) -> Error {
    let msg = if full {
        format!("The path {path} does not exist. Please provide a valid path.")
    } else {
        format!("Error: The path {path} does not exist")
    };
    refuse_as(ErrorKind::NotFound, msg)
}

/// The session's views, if its surface keeps them.
fn views<'n>(notes: &'n Notes<'_>) -> Option<&'n Views> {
    notes.call().caller.views()
}

impl Notes<'_> {
    /// Runs one command of the memory tool.
    pub fn memory_tool(&self, req: &MemoryToolRequest) -> Result<MemoryToolResponse> {
        let result = match req.command.as_str() {
            "view" => self.mt_view(
                required(&req.path, "path", "view")?,
                req.view_range.as_deref(),
            ),
            "create" => self.mt_create(
                required(&req.path, "path", "create")?,
                required(&req.file_text, "file_text", "create")?,
            ),
            "str_replace" => self.mt_replace(
                required(&req.path, "path", "str_replace")?,
                required(&req.old_str, "old_str", "str_replace")?,
                req.new_str.as_deref().unwrap_or(""),
            ),
            "insert" => {
                let line = req.insert_line.ok_or_else(|| {
                    refuse("Error: Parameter `insert_line` is required for command: insert".into())
                })?;
                self.mt_insert(
                    required(&req.path, "path", "insert")?,
                    line,
                    required(&req.insert_text, "insert_text", "insert")?,
                )
            }
            "delete" => self.mt_delete(required(&req.path, "path", "delete")?),
            "rename" => self.mt_rename(
                required(&req.old_path, "old_path", "rename")?,
                required(&req.new_path, "new_path", "rename")?,
            ),
            other => Err(refuse(format!(
                "Error: Unknown command: {other}. The commands are view, create, str_replace, insert, delete and rename"
            ))),
        }?;
        Ok(MemoryToolResponse { result })
    }

    fn mt_view(&self, path: &str, range: Option<&[i64]>) -> Result<String> {
        let layout = self.layout();
        let folder = match target(path)? {
            Target::Root => String::new(),
            Target::Path(p) => {
                let full = layout.root.join(p.rel());
                if !memdir_store::fsx::is_real_dir(&full) {
                    return self.mt_view_file(path, &p, range);
                }
                // A folder now: what the session saw of a file here is gone.
                if let Some(v) = views(self) {
                    v.saw(&p, None);
                }
                p.as_str().to_string()
            }
        };
        let entries = note::list_folder(layout, &folder, usize::MAX)?;
        let depth_of =
            |p: &str| p.split('/').count() - folder.split('/').filter(|s| !s.is_empty()).count();
        let hidden = |p: &str| p.split('/').any(|c| c == "node_modules");
        let total = |prefix: &str| -> u64 {
            entries
                .iter()
                .filter(|e| !e.dir && !hidden(&e.path))
                .filter(|e| prefix.is_empty() || e.path.starts_with(&format!("{prefix}/")))
                .map(|e| e.len)
                .sum()
        };
        let base = path.trim_end_matches('/');
        let path = base;
        let mut shown: Vec<&note::Listed> =
            entries.iter().filter(|e| depth_of(&e.path) <= 2).collect();
        // Tree order: a folder's entries right after it, each level by name.
        shown.sort_by(|a, b| a.path.split('/').cmp(b.path.split('/')));
        let mut out = vec![
            format!(
                "Here're the files and directories up to 2 levels deep in {path}, excluding hidden items and node_modules:"
            ),
            format!("{}\t{base}", size(total(&folder))),
        ];
        for e in shown {
            if hidden(&e.path) {
                continue;
            }
            let rel = if folder.is_empty() {
                e.path.as_str()
            } else {
                &e.path[folder.len() + 1..]
            };
            if e.dir {
                out.push(format!("{}\t{base}/{rel}/", size(total(&e.path))));
            } else {
                out.push(format!("{}\t{base}/{rel}", size(e.len)));
            }
        }
        Ok(out.join("\n"))
    }

    fn mt_view_file(&self, path: &str, p: &NotePath, range: Option<&[i64]>) -> Result<String> {
        let Some(file) = note::read(self.layout(), p)? else {
            if let Some(v) = views(self) {
                v.saw(p, None);
            }
            return Err(missing(path, true));
        };
        let t = file.text.map_err(|why| {
            refuse_as(ErrorKind::Corrupt, format!("Error: The file {path} {why}"))
        })?;
        if let Some(v) = views(self) {
            v.saw(p, Some(&file.hash));
        }
        let (lines, _) = text::cut(&t, range)
            .map_err(|m| refuse(format!("Error: Invalid `view_range` parameter: {m}")))?;
        let header = format!("Here's the content of {path} with line numbers:");
        let mut body = String::new();
        let mut last = None;
        for (n, l) in &lines {
            let line = format!("{n:>6}\t{l}");
            if !body.is_empty() && body.len() + line.len() + 1 > MAX_VIEW_CHARS {
                break;
            }
            if !body.is_empty() {
                body.push('\n');
            }
            body.push_str(&line);
            last = Some(*n);
        }
        let mut out = format!("{header}\n{body}");
        if let (Some(shown), Some((end, _))) = (last, lines.last())
            && shown < *end
        {
            out.push_str(&format!(
                "\n[the view stops at line {shown} of {end}, after {MAX_VIEW_CHARS} characters; view_range [{}, -1] shows the rest]",
                shown + 1
            ));
        }
        Ok(out)
    }

    fn mt_create(&self, path: &str, file_text: &str) -> Result<String> {
        let Target::Path(p) = target(path)? else {
            return Err(refuse(format!("Error: File {path} already exists")));
        };
        let req = NoteWriteRequest {
            path: p.to_string(),
            text: file_text.to_string(),
            expected_hash: Some("absent".into()),
            reason: None,
        };
        if memdir_store::fsx::is_real_dir(&self.layout().root.join(p.rel())) {
            return Err(refuse_as(
                ErrorKind::Conflict,
                format!("Error: File {path} already exists"),
            ));
        }
        match self.write(&req) {
            Ok(out) => {
                if let Some(v) = views(self) {
                    v.saw(&p, out.hash.as_deref());
                }
                Ok(format!("File created successfully at: {path}"))
            }
            Err(e) if lost_race(&e) => Err(refuse_as(
                ErrorKind::Conflict,
                format!("Error: File {path} already exists"),
            )),
            Err(e) => Err(protocol_error(e)),
        }
    }

    fn mt_replace(&self, path: &str, old: &str, new: &str) -> Result<String> {
        let Target::Path(p) = target(path)? else {
            return Err(missing(path, false));
        };
        let req = NoteEditRequest {
            path: p.to_string(),
            old_str: Some(old.to_string()),
            new_str: Some(new.to_string()),
            expected_hash: views(self).and_then(|v| v.seen(&p)),
            ..Default::default()
        };
        match self.edit(&req) {
            Ok(out) => {
                if let Some(v) = views(self) {
                    v.saw(&p, out.hash.as_deref());
                }
                let now = note::read(self.layout(), &p)?
                    .and_then(|f| f.text.ok())
                    .unwrap_or_default();
                let line = out.line.unwrap_or(1);
                let first = line.saturating_sub(2).max(1) as i64;
                let last = (line + new.matches('\n').count() as u64 + 2) as i64;
                let (ls, _) = text::cut(&now, Some(&[first, last])).unwrap_or_default();
                Ok(format!(
                    "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n{}",
                    text::numbered(&ls)
                ))
            }
            Err(e) if lost_race(&e) => Err(changed_since_view(path)),
            Err(e) if e.kind == ErrorKind::NotFound && field_is(&e, "old_str") => {
                Err(refuse(format!(
                    "No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
                )))
            }
            Err(e) if field_is(&e, "old_str") && e.details.contains_key("lines") => {
                let lines: Vec<String> = e.details["lines"]
                    .as_array()
                    .map(|a| a.iter().map(|v| v.to_string()).collect())
                    .unwrap_or_default();
                Err(refuse(format!(
                    "No replacement was performed. Multiple occurrences of old_str `{old}` in lines: {}. Please ensure it is unique",
                    lines.join(", ")
                )))
            }
            Err(e) if e.kind == ErrorKind::NotFound => Err(refuse_as(
                ErrorKind::NotFound,
                format!("Error: The path {path} does not exist. Please provide a valid path."),
            )),
            Err(e) => Err(protocol_error(e)),
        }
    }

    fn mt_insert(&self, path: &str, line: i64, insert: &str) -> Result<String> {
        let Target::Path(p) = target(path)? else {
            return Err(missing(path, false));
        };
        let lines_now = || {
            note::read(self.layout(), &p)
                .ok()
                .flatten()
                .and_then(|f| f.text.ok())
                .map_or(0, |t| text::lines(&t).len())
        };
        let bad_line = |n: usize| {
            refuse(format!(
                "Error: Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: [0, {n}]"
            ))
        };
        if line < 0 {
            if note::read(self.layout(), &p)?.is_none() {
                return Err(missing(path, false));
            }
            return Err(bad_line(lines_now()));
        }
        let req = NoteEditRequest {
            path: p.to_string(),
            insert_line: Some(line as u64),
            insert_text: Some(insert.to_string()),
            expected_hash: views(self).and_then(|v| v.seen(&p)),
            ..Default::default()
        };
        match self.edit(&req) {
            Ok(out) => {
                if let Some(v) = views(self) {
                    v.saw(&p, out.hash.as_deref());
                }
                Ok(format!("The file {path} has been edited."))
            }
            Err(e) if lost_race(&e) => Err(changed_since_view(path)),
            Err(e) if field_is(&e, "insert_line") => Err(bad_line(lines_now())),
            Err(e) if e.kind == ErrorKind::NotFound => Err(missing(path, false)),
            Err(e) => Err(protocol_error(e)),
        }
    }

    fn mt_delete(&self, path: &str) -> Result<String> {
        let Target::Path(p) = target(path)? else {
            return Err(refuse(format!(
                "Error: Cannot delete the {ROOT} directory itself"
            )));
        };
        let full = self.layout().root.join(p.rel());
        if std::fs::symlink_metadata(&full).is_err() {
            return Err(missing(path, false));
        }
        // A folder has no hash to compare: its notes are deleted as they are.
        let folder = memdir_store::fsx::is_real_dir(&full);
        let req = NoteDeleteRequest {
            path: p.to_string(),
            expected_hash: views(self).filter(|_| !folder).and_then(|v| v.seen(&p)),
            ..Default::default()
        };
        match self.delete(&req) {
            Ok(_) => {
                if let Some(v) = views(self) {
                    v.forget_under(&p);
                }
                Ok(format!("Successfully deleted {path}"))
            }
            Err(e) if lost_race(&e) => Err(changed_since_view(path)),
            Err(e) if e.kind == ErrorKind::NotFound => Err(missing(path, false)),
            Err(e) => Err(protocol_error(e)),
        }
    }

    fn mt_rename(&self, old_path: &str, new_path: &str) -> Result<String> {
        let Target::Path(from) = target(old_path)? else {
            return Err(refuse(format!(
                "Error: Cannot rename the {ROOT} directory itself"
            )));
        };
        let Target::Path(to) = target(new_path)? else {
            return Err(refuse(format!(
                "Error: The destination {new_path} already exists"
            )));
        };
        let root = &self.layout().root;
        if std::fs::symlink_metadata(root.join(to.rel())).is_ok() {
            return Err(refuse_as(
                ErrorKind::Conflict,
                format!("Error: The destination {new_path} already exists"),
            ));
        }
        if std::fs::symlink_metadata(root.join(from.rel())).is_err() {
            return Err(missing(old_path, false));
        }
        let req = NoteRenameRequest {
            from: from.to_string(),
            to: to.to_string(),
            ..Default::default()
        };
        match self.rename(&req) {
            Ok(_) => {
                if let Some(v) = views(self) {
                    v.move_under(&from, &to);
                }
                Ok(format!("Successfully renamed {old_path} to {new_path}"))
            }
            Err(e) if e.kind == ErrorKind::Conflict && field_is(&e, "to") => Err(refuse_as(
                ErrorKind::Conflict,
                format!("Error: The destination {new_path} already exists"),
            )),
            Err(e) if e.kind == ErrorKind::NotFound => Err(missing(old_path, false)),
            Err(e) => Err(protocol_error(e)),
        }
    }
}

/// Whether `e` names the request field `field`.
fn field_is(e: &Error, field: &str) -> bool {
    e.details.get("field").and_then(|v| v.as_str()) == Some(field)
}

/// Any other error of a note operation, as the tool's result: `Error: ` and its message.
fn protocol_error(e: Error) -> Error {
    if e.message.starts_with("Error: ") {
        return e;
    }
    let message = format!("Error: {}", e.message);
    Error { message, ..e }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_as_the_protocol_prints_them() {
        assert_eq!(size(0), "0B");
        assert_eq!(size(100), "100B");
        assert_eq!(size(1000), "1000B");
        assert_eq!(size(1536), "1.5K");
        assert_eq!(size(4096), "4K");
        assert_eq!(size(3 * 1024 * 1024), "3M");
    }

    #[test]
    fn paths_stay_under_the_root() {
        assert!(matches!(target("/memories"), Ok(Target::Root)));
        assert!(matches!(target("/memories/"), Ok(Target::Root)));
        assert!(
            matches!(target("/memories/a/b.md"), Ok(Target::Path(p)) if p.as_str() == "a/b.md")
        );
        for bad in [
            "/etc/passwd",
            "memories/a.md",
            "/memoriesX/a.md",
            "/memories/../etc/passwd",
            "/memories/a/../../b",
            "/memories/%2e%2e/x",
            "/memories/a%2Fb",
            "/memories/a\\b",
        ] {
            assert!(target(bad).is_err(), "{bad} passed");
        }
        let e = target("/memories/../../etc/passwd").err().unwrap();
        assert_eq!(
            e.message,
            "Error: Path /memories/../../etc/passwd would escape /memories directory"
        );
    }
}
