//! Size limits every surface and the engine share (STORAGE.md lists them for users).

/// Largest chunk content, in bytes.
pub const MAX_CHUNK_BYTES: usize = 256 * 1024;
/// Largest chunk metadata (compact JSON), in bytes.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;
/// Most chunks in one ingest batch.
pub const MAX_BATCH_CHUNKS: usize = 10_000;
/// Largest ingest batch, in bytes of content.
pub const MAX_BATCH_BYTES: usize = 32 * 1024 * 1024;
/// Largest category file, in bytes.
pub const MAX_CATEGORY_BYTES: usize = 1024 * 1024;
/// Largest log entry `data` (compact JSON), in bytes.
pub const MAX_LOG_ENTRY_BYTES: usize = 64 * 1024;
/// Largest `reason`, in characters.
pub const MAX_REASON_CHARS: usize = 1000;
/// Most entries a log may keep.
pub const MAX_LOG_ENTRIES: u64 = 100_000;
/// Default log retention, in entries.
pub const DEFAULT_LOG_ENTRIES: u64 = 200;
/// Largest page of results.
pub const MAX_LIMIT: usize = 1000;
/// The deepest nesting memdir stores in a category, a log entry or chunk metadata. A history
/// entry wraps a category's content one level deeper, and every reader (serde_json stops at
/// 128 levels) must read it back, so documents deeper than this are refused on write and
/// reported as malformed when placed by hand.
pub const MAX_STORED_DEPTH: usize = 100;
/// Deepest nesting of a category's data, a log entry's data or chunk metadata: the files
/// wrap them a few levels deeper, and every stored file must stay readable
/// ([`MAX_STORED_DEPTH`]).
pub const MAX_DATA_DEPTH: usize = MAX_STORED_DEPTH - 4;
