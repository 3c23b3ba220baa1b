//! The `openai` provider: any OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, Ollama,
//! llama.cpp, LM Studio, vLLM, ...), over blocking HTTP.
//!
//! One request per batch; a timeout, a refused connection, `429` or a `5xx` is retried with
//! exponential backoff (100 ms, 200 ms, ... up to 2 s) as many times as configured; any other
//! status, a body that is not an embeddings response, a vector count that does not match the
//! texts, or a vector of other dimensions than configured is an error at once.

use std::time::Duration;

use serde_json::{Value, json};

use super::{EmbedError, Embedder, OpenAiSpec, normalize};

/// Largest response body read, in bytes.
const MAX_BODY: u64 = 256 << 20;

pub struct OpenAi {
    spec: OpenAiSpec,
    id: String,
    query_prefix: String,
    document_prefix: String,
    agent: ureq::Agent,
}

impl OpenAi {
    pub fn new(
        spec: OpenAiSpec,
        id: String,
        query_prefix: String,
        document_prefix: String,
    ) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(spec.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        OpenAi {
            spec,
            id,
            query_prefix,
            document_prefix,
            agent,
        }
    }

    /// The URL requests go to.
    pub fn endpoint(&self) -> String {
        let u = self.spec.url.trim_end_matches('/');
        if u.ends_with("/embeddings") {
            u.to_string()
        } else {
            format!("{u}/embeddings")
        }
    }

    /// One attempt: `Err((retryable, why))`.
    fn attempt(&self, body: &Value, n: usize) -> Result<Vec<Vec<f32>>, (bool, String)> {
        let url = self.endpoint();
        let mut req = self
            .agent
            .post(&url)
            .header("Content-Type", "application/json");
        if let Some(k) = &self.spec.api_key {
            req = req.header("Authorization", &format!("Bearer {k}"));
        }
        let mut resp = match req.send_json(body) {
            Ok(r) => r,
            Err(ureq::Error::Timeout(_)) => {
                let ms = self.spec.timeout.as_millis();
                return Err((true, format!("{url}: no answer within {ms} ms")));
            }
            Err(e) => return Err((true, format!("{url}: {e}"))),
        };
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .map_err(|e| match e {
                ureq::Error::Timeout(_) => {
                    let ms = self.spec.timeout.as_millis();
                    (true, format!("{url}: no answer within {ms} ms"))
                }
                e => (true, format!("{url}: reading the response: {e}")),
            })?;
        if status != 200 {
            let retry = status == 429 || status >= 500;
            let snippet: String = text.chars().take(200).collect();
            return Err((retry, format!("{url} answered HTTP {status}: {snippet}")));
        }
        parse(&text, n, self.spec.dimensions).map_err(|m| (false, format!("{url}: {m}")))
    }
}

/// Reads an embeddings response holding `n` vectors of `dims` dimensions (any, when `None`,
/// but all the same).
pub fn parse(text: &str, n: usize, dims: Option<usize>) -> Result<Vec<Vec<f32>>, String> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| format!("the response is not JSON: {e}"))?;
    let data = v
        .get("data")
        .and_then(Value::as_array)
        .ok_or("the response has no `data` list of embeddings")?;
    if data.len() != n {
        return Err(format!(
            "asked for {n} embeddings, the response holds {}",
            data.len()
        ));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
    for (i, item) in data.iter().enumerate() {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .map_or(i, |x| x as usize);
        let emb = item.get("embedding").and_then(Value::as_array).ok_or(
            "an item of `data` has no `embedding` list (base64 answers are not asked for)",
        )?;
        let mut vec: Vec<f32> = emb
            .iter()
            .map(|x| x.as_f64().map(|f| f as f32))
            .collect::<Option<_>>()
            .ok_or("an embedding holds a value that is not a number")?;
        let want = dims.or_else(|| out.iter().flatten().next().map(Vec::len));
        if let Some(d) = want
            && vec.len() != d
        {
            return Err(format!(
                "the model returned vectors of {} dimensions; {d} are configured (set `dimensions` in [embeddings] to the model's)",
                vec.len()
            ));
        }
        if vec.is_empty() {
            return Err("the model returned an empty vector".into());
        }
        normalize(&mut vec);
        let slot = out
            .get_mut(index)
            .ok_or_else(|| format!("an embedding has index {index}, beyond the {n} asked for"))?;
        *slot = Some(vec);
    }
    out.into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| "the response repeats an index and misses another".to_string())
}

impl Embedder for OpenAi {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn embed(&self, texts: &[String], query: bool) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        if self.spec.api_key.is_none()
            && let Some(name) = &self.spec.api_key_env
        {
            return Err(EmbedError(format!(
                "the environment variable {name} (api_key_env in [embeddings]) is not set"
            )));
        }
        let prefix = if query {
            &self.query_prefix
        } else {
            &self.document_prefix
        };
        let input: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        let mut body =
            json!({"model": self.spec.model, "input": input, "encoding_format": "float"});
        if let Some(d) = self.spec.dimensions {
            body["dimensions"] = json!(d);
        }
        if let Some((q, d)) = &self.spec.input_types {
            body["input_type"] = json!(if query { q } else { d });
        }
        let mut delay = Duration::from_millis(100);
        let mut tries = 0;
        loop {
            match self.attempt(&body, texts.len()) {
                Ok(v) => return Ok(v),
                Err((retry, why)) => {
                    if !retry || tries >= self.spec.retries {
                        let after = if tries > 0 {
                            format!(" (after {} attempts)", tries + 1)
                        } else {
                            String::new()
                        };
                        return Err(EmbedError(format!("{why}{after}")));
                    }
                }
            }
            tries += 1;
            std::thread::sleep(delay);
            delay = (delay * 2).min(Duration::from_secs(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_read_by_index_and_checked() {
        let r = r#"{"data":[{"index":1,"embedding":[0,2]},{"index":0,"embedding":[3,4]}]}"#;
        let v = parse(r, 2, Some(2)).unwrap();
        assert_eq!(v[0], vec![0.6, 0.8]);
        assert_eq!(v[1], vec![0.0, 1.0]);
        assert!(
            parse(r, 2, Some(3))
                .unwrap_err()
                .contains("2 dimensions; 3")
        );
        assert!(parse(r, 3, None).unwrap_err().contains("asked for 3"));
        assert!(parse("nope", 1, None).unwrap_err().contains("not JSON"));
        let mixed = r#"{"data":[{"embedding":[1,2]},{"embedding":[1,2,3]}]}"#;
        assert!(parse(mixed, 2, None).is_err());
    }
}
