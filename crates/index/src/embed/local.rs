//! The `local` provider: a BERT-family sentence-embedding model (all-MiniLM-L6-v2 class) run
//! in this process with candle, from a directory holding `config.json`, `tokenizer.json` and
//! `model.safetensors`. Mean pooling over the tokens, then unit length (what
//! sentence-transformers does for these models).
//!
//! The model is loaded on the first call, not when the embedder is made: a server starts as
//! fast as without it.

use std::path::PathBuf;
use std::sync::OnceLock;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

use super::{EmbedError, Embedder, missing_files, normalize};

/// Longest input, in tokens; longer texts are cut (the models are trained on 256 or fewer).
const MAX_TOKENS: usize = 256;

struct Loaded {
    model: BertModel,
    tokenizer: Tokenizer,
}

pub struct Local {
    dir: PathBuf,
    id: String,
    query_prefix: String,
    document_prefix: String,
    loaded: OnceLock<Result<Loaded, EmbedError>>,
}

impl Local {
    pub fn new(dir: PathBuf, id: String, query_prefix: String, document_prefix: String) -> Self {
        Local {
            dir,
            id,
            query_prefix,
            document_prefix,
            loaded: OnceLock::new(),
        }
    }

    fn load(&self) -> Result<Loaded, EmbedError> {
        let dir = &self.dir;
        let missing = missing_files(dir);
        if !missing.is_empty() {
            return Err(EmbedError(format!(
                "the model directory {} lacks {}",
                dir.display(),
                missing.join(", ")
            )));
        }
        let err = |what: &str, e: &dyn std::fmt::Display| {
            EmbedError(format!(
                "loading the model in {}: {what}: {e}",
                dir.display()
            ))
        };
        let cfg_text =
            std::fs::read_to_string(dir.join("config.json")).map_err(|e| err("config.json", &e))?;
        let config: Config = serde_json::from_str(&cfg_text).map_err(|e| err("config.json", &e))?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| err("tokenizer.json", &e))?;
        tokenizer.with_padding(Some(PaddingParams::default()));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS.min(config.max_position_embeddings),
                ..Default::default()
            }))
            .map_err(|e| err("tokenizer.json", &e))?;
        let device = Device::Cpu;
        let tensors = candle_core::safetensors::load(dir.join("model.safetensors"), &device)
            .map_err(|e| err("model.safetensors", &e))?;
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let model = BertModel::load(vb, &config).map_err(|e| err("model.safetensors", &e))?;
        Ok(Loaded { model, tokenizer })
    }

    fn run(&self, m: &Loaded, texts: &[String]) -> candle_core::Result<Vec<Vec<f32>>> {
        let enc = m
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(candle_core::Error::msg)?;
        let device = &m.model.device;
        let rows = |f: &dyn Fn(&tokenizers::Encoding) -> Vec<u32>| -> candle_core::Result<Tensor> {
            let v: Vec<Tensor> = enc
                .iter()
                .map(|e| Tensor::new(f(e).as_slice(), device))
                .collect::<candle_core::Result<_>>()?;
            Tensor::stack(&v, 0)
        };
        let ids = rows(&|e| e.get_ids().to_vec())?;
        let types = rows(&|e| e.get_type_ids().to_vec())?;
        let mask = rows(&|e| e.get_attention_mask().to_vec())?;
        let out = m.model.forward(&ids, &types, Some(&mask))?;
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = out.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
        let pooled = summed.broadcast_div(&counts)?;
        let mut vecs: Vec<Vec<f32>> = pooled.to_vec2()?;
        vecs.iter_mut().for_each(|v| normalize(v));
        Ok(vecs)
    }
}

impl Embedder for Local {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn embed(&self, texts: &[String], query: bool) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let m = self
            .loaded
            .get_or_init(|| self.load())
            .as_ref()
            .map_err(Clone::clone)?;
        let prefix = if query {
            &self.query_prefix
        } else {
            &self.document_prefix
        };
        let input: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        self.run(m, &input)
            .map_err(|e| EmbedError(format!("the local model failed: {e}")))
    }
}
