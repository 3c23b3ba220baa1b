//! Fetching a local model from its public hub (Hugging Face) into the model cache, on a
//! machine that can reach it: `config.json`, `tokenizer.json` and `model.safetensors` of a
//! repository such as `sentence-transformers/all-MiniLM-L6-v2`, each written to a temporary
//! file and renamed into place, so an interrupted fetch leaves no half file under its name.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{EmbedError, MODEL_FILES};

/// Largest file fetched, in bytes.
const MAX_FILE: u64 = 2 << 30;

/// The directory a model repository is cached in: `owner/name` becomes `owner--name`.
pub fn model_dir(cache: &Path, repo: &str) -> PathBuf {
    cache.join(repo.replace('/', "--"))
}

/// Whether `repo` is a hub repository name (`owner/name` of letters, digits, `-`, `_`, `.`).
pub fn valid_repo(repo: &str) -> bool {
    let parts: Vec<&str> = repo.split('/').collect();
    parts.len() == 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && !p.starts_with('.')
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
}

/// Downloads the model files of `repo` from `base` (`https://huggingface.co`) into its
/// directory under `cache`; returns the directory.
pub fn fetch(base: &str, repo: &str, cache: &Path) -> Result<PathBuf, EmbedError> {
    let dir = model_dir(cache, repo);
    std::fs::create_dir_all(&dir)
        .map_err(|e| EmbedError(format!("create {}: {e}", dir.display())))?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(20)))
        .http_status_as_error(false)
        .build()
        .into();
    for file in MODEL_FILES {
        let url = format!("{}/{repo}/resolve/main/{file}", base.trim_end_matches('/'));
        let mut resp = agent
            .get(&url)
            .call()
            .map_err(|e| EmbedError(format!("{url}: {e}")))?;
        if resp.status().as_u16() != 200 {
            return Err(EmbedError(format!(
                "{url} answered HTTP {}",
                resp.status().as_u16()
            )));
        }
        let tmp = dir.join(format!(".{file}.part"));
        let mut out = std::fs::File::create(&tmp)
            .map_err(|e| EmbedError(format!("create {}: {e}", tmp.display())))?;
        let mut body = resp.body_mut().with_config().limit(MAX_FILE).reader();
        std::io::copy(&mut body, &mut out)
            .and_then(|_| out.flush())
            .map_err(|e| EmbedError(format!("{url}: {e}")))?;
        std::fs::rename(&tmp, dir.join(file))
            .map_err(|e| EmbedError(format!("rename {}: {e}", tmp.display())))?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_names_cannot_leave_the_cache() {
        assert!(valid_repo("sentence-transformers/all-MiniLM-L6-v2"));
        for bad in ["../x", "a/../b", "a", "a/b/c", "/a", "a/.b", "a/b c"] {
            assert!(!valid_repo(bad), "{bad}");
        }
        assert_eq!(model_dir(Path::new("/c"), "a/b"), PathBuf::from("/c/a--b"));
    }
}
