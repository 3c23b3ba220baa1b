//! Notes: requests and responses of the operations on the Markdown files under `notes/`, and
//! of the memory-tool protocol that maps `/memories` onto them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{HistoryVersion, VersionRef, defaults, num};

/// Parameters of a note read.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct NoteReadRequest {
    /// The note's path below notes/ (projects/orbital.md).
    pub path: String,
    /// Only these lines: [first, last], numbered from 1; last -1 is the end.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_range: Option<Vec<i64>>,
    /// An old version: its number, id or hash (12+ digits) from the history.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<VersionRef>,
    /// As it stood at this time.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// A note as read.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct NoteReadResponse {
    /// The note's path.
    pub path: String,
    /// Its text (the lines asked for, with view_range).
    pub text: String,
    /// The hash of the whole file: pass it as expected_hash to change exactly this text.
    pub hash: String,
    /// Lines in the whole note.
    pub lines: u64,
    /// The first and last line returned (numbered from 1; [0, 0] for an empty note).
    pub range: [u64; 2],
    /// Its version number.
    pub version: u64,
    /// When it was last written.
    pub updated_at: String,
    /// Who wrote it.
    pub updated_by: String,
    /// False when an old version was read.
    pub current: bool,
}

/// Parameters of a note write: the whole text.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteWriteRequest {
    /// The note's path below notes/ (projects/orbital.md).
    pub path: String,
    /// The whole text.
    pub text: String,
    /// The hash it must have now (from a read), or "absent" to create only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_hash: Option<String>,
    /// Why (kept in history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Parameters of an append to a note (created when absent).
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteAppendRequest {
    /// The note's path below notes/.
    pub path: String,
    /// The text to add at the end, on a line of its own.
    pub text: String,
    /// The hash it must have now (from a read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_hash: Option<String>,
    /// Why (kept in history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Parameters of an edit in place: replace one occurrence of old_str, or insert after a line.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct NoteEditRequest {
    /// The note's path below notes/.
    pub path: String,
    /// Text that occurs exactly once in the note, to be replaced by new_str.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_str: Option<String>,
    /// The replacement of old_str (default: nothing, it is removed).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_str: Option<String>,
    /// Insert insert_text after this line (0: at the start).
    #[arg(long)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "num::opt_u64"
    )]
    pub insert_line: Option<u64>,
    /// The text to insert after insert_line.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insert_text: Option<String>,
    /// The hash it must have now (from a read).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_hash: Option<String>,
    /// Why (kept in history).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A note change: its new version.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct NoteWriteResponse {
    /// The note's path.
    pub path: String,
    /// Its hash now (null after a delete).
    pub hash: Option<String>,
    /// Its version number now.
    pub version: u64,
    /// The history id of that version.
    pub version_id: String,
    /// write, edit, append, delete, rename or restore.
    pub op: String,
    /// True when the note already held this text: no version was made.
    pub unchanged: bool,
    /// The first line the change touched (numbered from 1), for an edit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

/// Parameters of a note delete.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct NoteDeleteRequest {
    /// The note's path below notes/, or a folder's (every note in it).
    pub path: String,
    /// Delete only if the note has this hash now.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_hash: Option<String>,
    /// Why (kept in history).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `note_delete`: the notes deleted.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct NoteDeleteResponse {
    /// Each note deleted (a folder's every note), with its tombstone.
    pub deleted: Vec<NoteWriteResponse>,
}

/// Parameters of a note rename.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct NoteRenameRequest {
    /// The note's path now (or a folder's).
    pub from: String,
    /// Its new path; nothing may be there yet.
    pub to: String,
    /// Rename only if the note has this hash now.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_hash: Option<String>,
    /// Why (kept in history).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `note_rename`: the notes moved, each as its version at the new path.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct NoteRenameResponse {
    /// Each note moved (a folder's every note).
    pub renamed: Vec<NoteWriteResponse>,
}

/// Parameters of a note listing.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct NoteListRequest {
    /// The folder to list (default: all notes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// Levels of folders to descend (default: all).
    #[arg(long)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "num::opt_usize"
    )]
    pub depth: Option<usize>,
}

/// One entry of a note listing.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct NoteEntry {
    /// Its path below notes/ (a folder's ends in /).
    pub path: String,
    /// Its size in bytes (0 for a folder).
    pub size: u64,
    /// When the note was last written (its newest version's time; for a file memdir has no
    /// version of yet, its modification time); absent for a folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
}

/// `note_list`: notes and folders, by path.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct NoteListResponse {
    /// The folder listed ("" for all).
    pub folder: String,
    /// Entries, by path.
    pub notes: Vec<NoteEntry>,
}

/// Parameters of a note's history.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct NoteHistoryRequest {
    /// The note's path below notes/.
    pub path: String,
    /// Versions to list, newest first.
    #[arg(long, default_value_t = defaults::HISTORY_LIMIT, value_parser = num::parse_usize, allow_negative_numbers = true)]
    #[serde(default = "defaults::history_limit", deserialize_with = "num::usize")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: usize,
}

/// `note_history`: versions, newest first.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct NoteHistoryResponse {
    /// The note's path.
    pub path: String,
    /// Whether the note exists now (false: its last version is a delete).
    pub exists: bool,
    /// History entries in all.
    pub total: usize,
    /// The newest `limit` of them.
    pub versions: Vec<HistoryVersion>,
}

/// Parameters of a diff between two versions of a note.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct NoteDiffRequest {
    /// The note's path below notes/.
    pub path: String,
    /// From this version (default: the parent of `to`).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<VersionRef>,
    /// To this version (default: the newest).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<VersionRef>,
}

/// `note_diff`: a unified diff of two versions' text.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct NoteDiffResponse {
    /// The note's path.
    pub path: String,
    /// The older version (null: nothing before).
    pub from: Option<u64>,
    /// The newer version.
    pub to: u64,
    /// The unified diff.
    pub diff: String,
}

/// Parameters of a note restore.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct NoteRestoreRequest {
    /// The note's path below notes/.
    pub path: String,
    /// The version to restore: its number, id or hash (12+ digits) from the history.
    #[arg(long)]
    pub version: VersionRef,
    /// Restore only if the note has this hash now.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_hash: Option<String>,
    /// Why (kept in history).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Parameters of the memory tool: one command on a path under /memories.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct MemoryToolRequest {
    /// view, create, str_replace, insert, delete or rename.
    pub command: String,
    /// The file or directory, under /memories.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// view: [first, last] line, numbered from 1; last -1 is the end.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_range: Option<Vec<i64>>,
    /// create: the file's text.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_text: Option<String>,
    /// str_replace: the text to replace (must occur once).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_str: Option<String>,
    /// str_replace: its replacement (default: nothing).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_str: Option<String>,
    /// insert: the line after which to insert (0: at the start).
    #[arg(long, allow_negative_numbers = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insert_line: Option<i64>,
    /// insert: the text to insert.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insert_text: Option<String>,
    /// rename: the path now.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// rename: the new path.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_path: Option<String>,
}

/// The memory tool's answer: the protocol's result string.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct MemoryToolResponse {
    /// The result, as the memory tool protocol words it.
    pub result: String,
}

/// Parameters of `memdir notes export`: notes written out as plain files.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct NotesExportRequest {
    /// The directory to write the notes into (created when missing).
    #[arg(value_name = "DIR")]
    pub directory: String,
    /// Only the notes under this folder, written relative to it.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// Only say what would be written.
    #[arg(long)]
    #[serde(default)]
    pub dry_run: bool,
}

/// A file an export did not write, and why.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ExportConflict {
    /// The note's path.
    pub path: String,
    /// Why it was left as it is.
    pub reason: String,
}

/// `notes export`: what was written.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct NotesExportResponse {
    /// The directory written to.
    pub dir: String,
    /// Notes written (with dry_run: that would be).
    pub written: Vec<String>,
    /// Notes whose file already held their text.
    pub unchanged: usize,
    /// Files left alone: changed there since the last export, or not written by one.
    pub conflicts: Vec<ExportConflict>,
    /// Nothing was written.
    pub dry_run: bool,
}
