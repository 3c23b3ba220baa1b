//! The cross-process write lock: an exclusive advisory lock on `.memdir/lock`.
//!
//! Every mutation of the store happens under it. Waiting is bounded: the lock is polled with
//! jittered, growing sleeps until a deadline, then the caller gets a "store busy, retry" error.
//! The lock is tied to an open file description, so it also serialises threads of one process,
//! and the kernel releases it when a process dies, even by `kill -9`.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;
use std::time::{Duration, Instant};

use memdir_api::error::{Error, ErrorKind, IoContext};

/// Default time to wait for the write lock.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// A held write lock; released on drop.
pub struct WriteLock {
    _file: File,
}

fn jitter(seed: &mut u64) -> u64 {
    // xorshift: cheap, good enough to spread retries of competing processes.
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

impl WriteLock {
    /// Takes the lock at `path`, waiting at most `timeout`.
    pub fn acquire(path: &Path, timeout: Duration) -> Result<WriteLock, Error> {
        let file = crate::fsx::private_file(
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
        )
        .open(path)
        .at("open lock file", path)?;
        let start = Instant::now();
        let mut seed =
            (std::process::id() as u64) << 32 | start.elapsed().subsec_nanos() as u64 | 1;
        let mut backoff_ms = 1u64;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(WriteLock { _file: file }),
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(e)) => {
                    return Err(Error::from(memdir_api::error::IoError {
                        op: "lock",
                        path: path.to_path_buf(),
                        source: e,
                    }));
                }
            }
            if start.elapsed() >= timeout {
                return Err(Error::new(
                    ErrorKind::Busy,
                    format!(
                        "store busy: another memdir process held the write lock for {} ms",
                        timeout.as_millis()
                    ),
                )
                .hint("retry in a moment; nothing was changed")
                .detail("retry_after_ms", serde_json::Value::from(250)));
            }
            let sleep = 1 + jitter(&mut seed) % backoff_ms.max(1);
            std::thread::sleep(Duration::from_millis(sleep));
            backoff_ms = (backoff_ms * 2).min(50);
        }
    }
}
