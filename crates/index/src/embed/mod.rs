//! Embeddings: turning texts into vectors for semantic and hybrid search.
//!
//! A [`Spec`] says which provider the configuration chose; [`Spec::open`] makes an
//! [`Embedder`] from it without doing any work (no connection, no model loaded): the first
//! call to [`Embedder::embed`] does that, so a server answers its first request as fast as
//! without embeddings.
//!
//! - `openai` ([`openai`]): any OpenAI-compatible `/v1/embeddings` endpoint, over blocking
//!   HTTP with a timeout and retries with backoff.
//! - `local` ([`local`], behind the `local-embeddings` cargo feature): a BERT-family sentence
//!   model (all-MiniLM-L6-v2 class) run in process from a directory holding `config.json`,
//!   `tokenizer.json` and `model.safetensors`.
//!
//! A provider that fails says why in an [`EmbedError`]; search turns that into a keyword
//! fallback with the reason, never into a failed search.
//!
//! Architecture Invariant: this module knows nothing of the store, the ledger or the index; it
//! maps texts to vectors and nothing else.

pub mod fetch;
#[cfg(feature = "local-embeddings")]
pub mod local;
pub mod openai;

use std::path::PathBuf;
use std::time::Duration;

/// Why a provider produced no vectors. The message is shown to users and agents as the reason
/// of a keyword fallback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbedError(pub String);

impl std::fmt::Display for EmbedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Turns texts into unit-length vectors.
pub trait Embedder: Send + Sync {
    /// The model's identity: vectors are stored under it, so two models never mix.
    fn model_id(&self) -> &str;
    /// Embeds `texts` (documents, or one query with `query`), one vector each, in order.
    fn embed(&self, texts: &[String], query: bool) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// The `openai` provider's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenAiSpec {
    /// The endpoint's base URL: `http://127.0.0.1:8080/v1` (`/embeddings` is appended unless
    /// the URL already ends with it).
    pub url: String,
    pub model: String,
    /// The name of the environment variable that holds the API key, and its value when set.
    pub api_key_env: Option<String>,
    pub api_key: Option<String>,
    /// The vector length expected (and asked for); a response of another length is an error.
    pub dimensions: Option<usize>,
    pub timeout: Duration,
    pub retries: u32,
    /// The `input_type` sent with a query and with a document (`("query", "passage")`,
    /// `("query", "document")`, `("search_query", "search_document")`), for servers of
    /// asymmetric models that take it; `None`: not sent (OpenAI itself refuses the field).
    pub input_types: Option<(String, String)>,
}

/// The `local` provider's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalSpec {
    /// The model directory: `config.json`, `tokenizer.json`, `model.safetensors`.
    pub dir: PathBuf,
}

/// Which provider.
#[derive(Clone, Debug, PartialEq)]
pub enum Provider {
    OpenAi(OpenAiSpec),
    Local(LocalSpec),
}

/// The `[embeddings]` section, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    pub provider: Provider,
    /// Texts per provider call.
    pub batch_size: usize,
    /// Most texts a search embeds before it answers (the rest is embedded by later searches
    /// or, in a server, in the background).
    pub max_per_search: usize,
    /// Prepended to a query and to a document before embedding (`query: ` and `passage: `
    /// for the E5 family).
    pub query_prefix: String,
    pub document_prefix: String,
}

/// Where `memdir models fetch` puts models and where a `local` model named without a path is
/// looked for.
pub fn cache_dir(xdg_cache: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    match xdg_cache.filter(|x| std::path::Path::new(x).is_absolute()) {
        Some(x) => Some(PathBuf::from(x).join("memdir/models")),
        None => home.map(|h| PathBuf::from(h).join(".cache/memdir/models")),
    }
}

/// What names a local model: its own files, never its directory. A hash of `config.json`,
/// `tokenizer.json`, the weights file's length and its safetensors header (every tensor's
/// name, type, shape and offsets), and four 4 KiB samples of the weights spread over the file
/// (a fine-tuned model of the same shapes changes them all). The same model in two
/// directories shares one vector cache; two models in directories of one name, or a model
/// replaced in place, never do. Reads about 20 KiB of the weights, not all of them.
fn files_digest(dir: &std::path::Path) -> String {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut h = blake3::Hasher::new();
    for f in ["config.json", "tokenizer.json"] {
        let bytes = std::fs::read(dir.join(f)).unwrap_or_default();
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    let mut weights = || -> std::io::Result<()> {
        let mut f = std::fs::File::open(dir.join("model.safetensors"))?;
        let len = f.metadata()?.len();
        h.update(&len.to_le_bytes());
        // The header: its length in 8 bytes, then that much JSON (capped: a sane header is
        // well under a megabyte).
        let mut n = [0u8; 8];
        f.read_exact(&mut n)?;
        let header = u64::from_le_bytes(n)
            .min(len.saturating_sub(8))
            .min(16 << 20);
        let mut buf = vec![0u8; header as usize];
        f.read_exact(&mut buf)?;
        h.update(&buf);
        let mut sample = [0u8; 4096];
        for k in 1..=4u64 {
            let at = (len / 5) * k;
            f.seek(SeekFrom::Start(at))?;
            let got = f.read(&mut sample)?;
            h.update(&sample[..got]);
        }
        Ok(())
    };
    if weights().is_err() {
        h.update(b"no readable weights");
    }
    h.finalize().to_hex()[..16].to_string()
}

impl Spec {
    /// The identity of the model this spec names (see [`Embedder::model_id`]).
    pub fn model_id(&self) -> String {
        match &self.provider {
            Provider::OpenAi(o) => {
                let mut id = format!(
                    "openai:{}:{}:{}",
                    o.model,
                    o.dimensions.map_or("auto".to_string(), |d| d.to_string()),
                    self.document_prefix
                );
                // A document embedded as a `passage` is another vector than one embedded
                // without the field.
                if let Some((_, doc)) = &o.input_types {
                    id.push_str(&format!(":input_type={doc}"));
                }
                id
            }
            Provider::Local(l) => {
                format!("local:{}:{}", files_digest(&l.dir), self.document_prefix)
            }
        }
    }

    /// The spec as `config show` and `models` print it: never the API key, only where it is
    /// read from and whether it is set.
    pub fn shown(&self) -> serde_json::Value {
        use serde_json::json;
        let mut v = json!({
            "provider": self.provider_name(),
            "model_id": self.model_id(),
            "batch_size": self.batch_size,
            "max_per_search": self.max_per_search,
        });
        match &self.provider {
            Provider::OpenAi(o) => {
                v["url"] = json!(o.url);
                v["model"] = json!(o.model);
                v["dimensions"] = json!(o.dimensions);
                v["timeout_ms"] = json!(o.timeout.as_millis() as u64);
                v["retries"] = json!(o.retries);
                v["api_key_env"] = json!(o.api_key_env);
                v["api_key_set"] = json!(o.api_key.is_some());
            }
            Provider::Local(l) => {
                v["model_dir"] = json!(l.dir.display().to_string());
                v["present"] = json!(missing_files(&l.dir).is_empty());
            }
        }
        v
    }

    /// The provider's name (`openai` or `local`).
    pub fn provider_name(&self) -> &'static str {
        match self.provider {
            Provider::OpenAi(_) => "openai",
            Provider::Local(_) => "local",
        }
    }

    /// An embedder for this spec. Nothing is loaded or contacted yet.
    pub fn open(&self) -> Result<Box<dyn Embedder>, EmbedError> {
        match &self.provider {
            Provider::OpenAi(o) => Ok(Box::new(openai::OpenAi::new(
                o.clone(),
                self.model_id(),
                self.query_prefix.clone(),
                self.document_prefix.clone(),
            ))),
            #[cfg(feature = "local-embeddings")]
            Provider::Local(l) => Ok(Box::new(local::Local::new(
                l.dir.clone(),
                self.model_id(),
                self.query_prefix.clone(),
                self.document_prefix.clone(),
            ))),
            #[cfg(not(feature = "local-embeddings"))]
            Provider::Local(_) => Err(EmbedError(
                "the local provider is not built into this memdir: build it with `--features local-embeddings`, or use the openai provider".into(),
            )),
        }
    }
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

/// The files a local model directory must hold.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Which of [`MODEL_FILES`] are missing from `dir`.
pub fn missing_files(dir: &std::path::Path) -> Vec<&'static str> {
    MODEL_FILES
        .iter()
        .copied()
        .filter(|f| !dir.join(f).is_file())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(dir: &std::path::Path) -> Spec {
        Spec {
            provider: Provider::Local(LocalSpec {
                dir: dir.to_path_buf(),
            }),
            batch_size: 8,
            max_per_search: 8,
            query_prefix: String::new(),
            document_prefix: String::new(),
        }
    }

    /// A small safetensors file: a header naming one tensor, then `data`.
    fn weights(dir: &std::path::Path, data: &[u8]) {
        let header = format!(
            r#"{{"w":{{"dtype":"U8","shape":[{}],"data_offsets":[0,{}]}}}}"#,
            data.len(),
            data.len()
        );
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        std::fs::write(dir.join("model.safetensors"), bytes).unwrap();
    }

    #[test]
    fn a_local_models_id_comes_from_its_files_not_its_directory() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("one"), t.path().join("two"));
        for d in [&a, &b] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("config.json"), "{}").unwrap();
            std::fs::write(d.join("tokenizer.json"), "vocab").unwrap();
            weights(d, &[7u8; 100_000]);
        }
        // The same files in two directories: one id, which names no directory.
        let id = local(&a).model_id();
        assert_eq!(id, local(&b).model_id());
        assert!(!id.contains("one") && id.starts_with("local:"), "{id}");
        // Fine-tuned: the same shapes and length, other weights.
        let mut tuned = vec![7u8; 100_000];
        tuned[60_000] = 8;
        weights(&b, &tuned);
        assert_ne!(id, local(&b).model_id());
        // Weights of another shape.
        weights(&b, &[7u8; 99_999]);
        assert_ne!(id, local(&b).model_id());
    }

    #[test]
    fn the_document_input_type_is_part_of_an_openai_models_id() {
        let spec = |types: Option<(&str, &str)>| Spec {
            provider: Provider::OpenAi(OpenAiSpec {
                url: "http://127.0.0.1:1/v1".into(),
                model: "e5".into(),
                api_key_env: None,
                api_key: None,
                dimensions: Some(384),
                timeout: Duration::from_secs(1),
                retries: 0,
                input_types: types.map(|(q, d)| (q.to_string(), d.to_string())),
            }),
            ..local(std::path::Path::new("/nowhere"))
        };
        // Unset: the id vectors were cached under before the field existed.
        assert_eq!(spec(None).model_id(), "openai:e5:384:");
        let p = spec(Some(("query", "passage"))).model_id();
        assert_eq!(p, "openai:e5:384::input_type=passage");
        assert_ne!(p, spec(Some(("query", "document"))).model_id());
    }

    #[test]
    fn two_local_models_in_directories_of_one_name_have_two_ids() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a/model"), t.path().join("b/model"));
        for (d, vocab) in [(&a, "one"), (&b, "two")] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("config.json"), "{}").unwrap();
            std::fs::write(d.join("tokenizer.json"), vocab).unwrap();
        }
        assert_ne!(local(&a).model_id(), local(&b).model_id());
        std::fs::write(b.join("tokenizer.json"), "one").unwrap();
        assert_eq!(local(&a).model_id(), local(&b).model_id(), "the same files");
        assert!(local(&a).model_id().starts_with("local:"));
    }
}
