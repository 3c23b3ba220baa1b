//! memdir benchmarks. Prints JSON figures; `bench/README.md` records the latest run.
//!
//! ```text
//! cargo run --release --example memdir-bench -- store [--chunks 100000]
//! cargo run --release --example memdir-bench -- search [--chunks 1000000]
//! cargo run --release --example memdir-bench -- mcp [--chunks 1000000]
//! cargo run --release --example memdir-bench -- recall
//! cargo run --release --example memdir-bench -- http [--chunks 100000] [--seconds 30]
//! cargo run --release --example memdir-bench -- fresh [--chunks 100000] [--server]
//! cargo run --release --example memdir-bench -- merge [--sizes 10,1000,10000] [--writes 30] [--pause-ms 0]
//! cargo run --release --example memdir-bench -- redact
//! cargo run --release --example memdir-bench -- notes [--chunks 100000] [--notes 10000]
//! cargo run --release --features local-embeddings --example memdir-bench -- embeddings --model DIR [--openai URL] [--chunks 100000]
//! ```
//!
//! Every run works in a fresh temporary directory (or `--dir`, reused when it already holds a
//! store of the right size, to skip building a large corpus twice).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

mod embeddings;

use memdir_api::Result;
use memdir_engine::Memdir;
use memdir_engine::service::{NewChunk, ReadRequest, SearchRequest, WriteRequest};
use serde_json::{Value, json};

/// A small deterministic PRNG (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Words with a Zipf-like frequency: word i is drawn with weight ~1/(i+1).
struct Vocab {
    words: Vec<String>,
}

impl Vocab {
    /// A two-word query of mid-frequency words, as the search benchmarks send.
    fn query2(&self, r: &mut Rng) -> String {
        format!(
            "{} {}",
            self.words[200 + r.below(3000) as usize],
            self.words[200 + r.below(3000) as usize]
        )
    }

    fn new(n: usize) -> Vocab {
        let syll = [
            "ka", "lo", "mi", "ne", "ru", "ta", "po", "se", "di", "vu", "ba", "ze", "qu", "fo",
            "hi", "gu",
        ];
        let mut words = Vec::with_capacity(n);
        let mut r = Rng(42);
        while words.len() < n {
            let len = 2 + r.below(3);
            let w: String = (0..len).map(|_| syll[r.below(16) as usize]).collect();
            if !words.contains(&w) {
                words.push(w);
            }
        }
        Vocab { words }
    }
    fn word(&self, r: &mut Rng) -> &str {
        // Inverse-CDF of a log-uniform draw gives a Zipf-like rank distribution.
        let n = self.words.len() as f64;
        let u = (r.below(1_000_000) as f64 + 0.5) / 1_000_000.0;
        let i = (n.powf(u) - 1.0) as usize;
        &self.words[i.min(self.words.len() - 1)]
    }
    fn sentence(&self, r: &mut Rng, words: usize) -> String {
        (0..words)
            .map(|_| self.word(r))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn pct(mut v: Vec<f64>) -> Value {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    json!({"n": v.len(), "p50_ms": round(at(0.5)), "p95_ms": round(at(0.95)), "p99_ms": round(at(0.99)), "max_ms": round(at(1.0))})
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// An estimate of the tokens a language model reads for `text`, modelled on the
/// pre-tokenization of BPE vocabularies (GPT-4o's o200k, Claude's): a run of letters is one
/// token per 6 characters (at least one: common words are one token), a run of digits one per
/// 3, a run of punctuation one per 2 characters (JSON's `":"` and `},{` are mostly one or two
/// tokens), and white space rides along with the next word. On English prose this gives about
/// 4.2 characters per token; on JSON a little less.
fn token_estimate(text: &str) -> usize {
    #[derive(PartialEq, Clone, Copy)]
    enum C {
        Letter,
        Digit,
        Punct,
        Space,
    }
    let class = |c: char| {
        if c.is_alphabetic() {
            C::Letter
        } else if c.is_numeric() {
            C::Digit
        } else if c.is_whitespace() {
            C::Space
        } else {
            C::Punct
        }
    };
    let (mut tokens, mut run, mut cur) = (0usize, 0usize, C::Space);
    let flush = |cur: C, run: usize| match cur {
        C::Letter => run.div_ceil(6),
        C::Digit => run.div_ceil(3),
        C::Punct => run.div_ceil(2),
        C::Space => 0,
    };
    for c in text.chars() {
        let k = class(c);
        if k != cur {
            tokens += flush(cur, run);
            cur = k;
            run = 0;
        }
        run += 1;
    }
    tokens + flush(cur, run)
}

/// Bytes and estimated tokens of answers.
fn sizes(texts: &[String]) -> Value {
    let dist = |mut v: Vec<usize>| {
        v.sort();
        let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
        json!({"p50": at(0.5), "p95": at(0.95), "max": at(1.0)})
    };
    json!({
        "n": texts.len(),
        "bytes": dist(texts.iter().map(|t| t.len()).collect()),
        "tokens_chars_div_4": dist(texts.iter().map(|t| t.chars().count() / 4).collect()),
        "tokens_bpe_estimate": dist(texts.iter().map(|t| token_estimate(t)).collect()),
    })
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// The `memdir` binary of the same build: the benchmark is an example
/// (`target/<profile>/examples/`), the binary sits one directory up.
fn memdir_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().expect("an executable lives in a directory");
    let dir = if dir.file_name().is_some_and(|n| n == "examples") {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    dir.join("memdir")
}

fn dir_size(p: &Path) -> u64 {
    walkdir::WalkDir::new(p)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// Ingests `chunks` chunks of 30 words spread evenly over `sessions` sessions, one session's
/// chunks per batch (as an import of whole transcripts would).
fn fill_sessions(
    m: &Memdir,
    chunks: usize,
    sessions: usize,
    vocab: &Vocab,
    seed: u64,
) -> Result<f64> {
    let mut r = Rng(seed);
    let start = Instant::now();
    let per = chunks.div_ceil(sessions);
    let mut left = chunks;
    for s in 0..sessions {
        let n = per.min(left);
        left -= n;
        let mut i = 0;
        while i < n {
            let take = (n - i).min(5000);
            let batch: Vec<NewChunk> = (0..take)
                .map(|_| NewChunk {
                    session_id: format!("session-{s:05}"),
                    content: vocab.sentence(&mut r, 30),
                    project: Some(format!("project-{}", s % 10)),
                    metadata: None,
                    ts: None,
                    source_id: None,
                    supersedes: None,
                })
                .collect();
            m.sessions().ingest(&batch)?;
            i += take;
        }
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Bulk ingest through the CLI, as a user runs it: `memdir ingest --jsonl FILE` on a fresh
/// store, with `--chunks` chunks of 30 words over `--sessions` sessions, the lines interleaved
/// (chunk i goes to session i mod sessions), so every batch of 1,000 touches
/// min(sessions, 1,000) segments. `--bin PATH` measures another build of `memdir`.
fn bench_bulk(args: &[String]) -> Result<Value> {
    let (_tmp, dir) = dir_arg(args);
    let chunks = arg(args, "--chunks", 100_000);
    let sessions = arg(args, "--sessions", 100).max(1);
    let bin = args
        .iter()
        .position(|a| a == "--bin")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(memdir_bin);
    let vocab = Vocab::new(5000);
    let mut r = Rng(17);
    let input = dir.with_extension("jsonl");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&input).expect("jsonl"));
        for i in 0..chunks {
            let s = i % sessions;
            let line = json!({"session_id": format!("s-{s:05}"), "project": format!("p-{}", s % 10), "content": vocab.sentence(&mut r, 30)});
            writeln!(f, "{line}").expect("write jsonl");
        }
    }
    let start = Instant::now();
    let out = Command::new(&bin)
        .arg("--dir")
        .arg(&dir)
        .args(["--json", "ingest", "--jsonl"])
        .arg(&input)
        .stderr(Stdio::inherit())
        .output()
        .expect("run memdir");
    let secs = start.elapsed().as_secs_f64();
    assert!(out.status.success(), "memdir ingest failed");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(
        v["count"].as_u64(),
        Some(chunks as u64),
        "every chunk saved: {v}"
    );
    // SAFETY: getrusage only writes the struct it is handed.
    let max_rss_kib = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u.ru_maxrss
    };
    let _ = std::fs::remove_file(&input);
    Ok(json!({
        "chunks": chunks,
        "sessions": sessions,
        "seconds": round(secs),
        "chunks_per_s": (chunks as f64 / secs).round(),
        "peak_rss_mib": round(max_rss_kib as f64 / 1024.0),
        "bin": bin.display().to_string(),
    }))
}

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn dir_arg(args: &[String]) -> (Option<tempfile::TempDir>, PathBuf) {
    match args
        .iter()
        .position(|a| a == "--dir")
        .and_then(|i| args.get(i + 1))
    {
        Some(d) => (None, PathBuf::from(d)),
        None => {
            let t = tempfile::Builder::new()
                .prefix("memdir-bench-")
                .tempdir()
                .expect("temp dir");
            let p = t.path().join("store");
            (Some(t), p)
        }
    }
}

fn bench_store(args: &[String]) -> Result<Value> {
    let (_tmp, dir) = dir_arg(args);
    let vocab = Vocab::new(5000);
    let mut r = Rng(7);
    let m = Memdir::open(&dir)?;
    m.init()?;
    // Durable single-chunk ingest, in-process.
    let mut single = Vec::new();
    for i in 0..300 {
        let c = NewChunk {
            session_id: "single".into(),
            content: vocab.sentence(&mut r, 30),
            project: None,
            metadata: None,
            ts: None,
            source_id: None,
            supersedes: None,
        };
        let t = Instant::now();
        m.sessions().ingest_one(c)?;
        if i >= 10 {
            single.push(ms(t));
        }
    }
    // One CLI process per chunk.
    let bin = memdir_bin();
    let mut cli = Vec::new();
    for _ in 0..60 {
        let t = Instant::now();
        let st = Command::new(&bin)
            .args([
                "--dir",
                &dir.display().to_string(),
                "ingest",
                "--session-id",
                "cli",
                "--text",
                &vocab.sentence(&mut r, 30),
            ])
            .stdout(Stdio::null())
            .status()
            .expect("run memdir");
        assert!(st.success());
        cli.push(ms(t));
    }
    // Batch throughput: 100k chunks of 30 words over 100 sessions.
    let chunks = arg(args, "--chunks", 100_000);
    let secs = fill_sessions(&m, chunks, 100, &vocab, 11)?;
    // Merge-write latency as one category grows from 10 to 1000 keys.
    let mut merge_at = serde_json::Map::new();
    let mut lat = Vec::new();
    for k in 0..1000 {
        let t = Instant::now();
        m.categories().write(&WriteRequest {
            category: "growing".into(),
            data: json!({ format!("key-{k:04}"): vocab.sentence(&mut r, 8) }),
            merge: true,
            ..Default::default()
        })?;
        lat.push(ms(t));
        if [9, 99, 999].contains(&k) {
            let window: Vec<f64> = lat.split_off(lat.len().saturating_sub(10));
            merge_at.insert(format!("{}_keys", k + 1), pct(window));
            lat.clear();
        }
    }
    // Append latency as a log grows to its retention (200) and beyond.
    let mut append_at = serde_json::Map::new();
    let mut lat = Vec::new();
    for k in 0..400 {
        let t = Instant::now();
        m.categories()
            .append(&memdir_engine::service::AppendRequest {
                category: "journal".into(),
                data: json!({"n": k, "text": vocab.sentence(&mut r, 10)}),
                ..Default::default()
            })?;
        lat.push(ms(t));
        if [19, 199, 399].contains(&k) {
            append_at.insert(
                format!("{}_appends", k + 1),
                pct(lat.split_off(lat.len().saturating_sub(20))),
            );
            lat.clear();
        }
    }
    // 1000 categories for the open-time figure.
    for c in 0..1000 {
        m.categories().write(&WriteRequest {
            category: format!("cat-{c:04}"),
            data: json!({"note": vocab.sentence(&mut r, 12), "n": c}),
            ..Default::default()
        })?;
    }
    drop(m);
    let mut open = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let m = Memdir::open(&dir)?;
        open.push(ms(t));
        drop(m);
    }
    let mut status_cli = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let st = Command::new(&bin)
            .args(["--dir", &dir.display().to_string(), "list"])
            .stdout(Stdio::null())
            .status()
            .expect("run memdir");
        assert!(st.success());
        status_cli.push(ms(t));
    }
    Ok(json!({
        "ingest_single_in_process": pct(single),
        "ingest_single_cli_process": pct(cli),
        "batch_ingest": {"chunks": chunks, "seconds": round(secs), "chunks_per_s": (chunks as f64 / secs).round()},
        "merge_write": merge_at,
        "log_append": append_at,
        "open_clean_store": {"chunks": chunks + 360, "categories": 1002, "in_process": pct(open), "cli_list_process": pct(status_cli)},
        "store_bytes": dir_size(&dir),
    }))
}

fn ensure_corpus(dir: &Path, chunks: usize) -> Result<(Memdir, Option<f64>)> {
    let m = Memdir::open(dir)?;
    let have = m.upkeep().status_as(&|_| true)?.chunks.max(0) as usize;
    if have >= chunks {
        return Ok((m, None));
    }
    let vocab = Vocab::new(20_000);
    let secs = fill_sessions(
        &m,
        chunks - have,
        (chunks / 200).max(10),
        &vocab,
        99 + have as u64,
    )?;
    Ok((m, Some(secs)))
}

fn bench_search(args: &[String]) -> Result<Value> {
    let (_tmp, dir) = dir_arg(args);
    let chunks = arg(args, "--chunks", 100_000);
    let (m, fill) = ensure_corpus(&dir, chunks)?;
    if let Ok(n) = std::env::var("MEMDIR_BENCH_PROFILE_SEARCH") {
        // For a profiler: only the default BM25 search with windows, n times.
        let vocab = Vocab::new(20_000);
        let mut r = Rng(5);
        m.indexing().refresh_index()?;
        let t = Instant::now();
        let n: usize = n.parse().unwrap_or(2000);
        for _ in 0..n {
            let k = 2 + r.below(2) as usize;
            let q = (0..k)
                .map(|_| vocab.words[200 + r.below(3000) as usize].clone())
                .collect::<Vec<_>>()
                .join(" ");
            let mut q = SearchRequest::new(&q);
            q.mode = std::env::var("MEMDIR_BENCH_MODE")
                .ok()
                .or(Some("bm25".into()));
            m.indexing().search(&q)?;
        }
        return Ok(json!({"searches": n, "mean_ms": ms(t) / n as f64}));
    }
    let t = Instant::now();
    let re = m.indexing().reindex(None)?;
    let reindex_s = t.elapsed().as_secs_f64();
    let index_bytes = dir_size(&dir.join(".memdir/index"));
    let vocab = Vocab::new(20_000);
    let mut r = Rng(5);
    let mut run = |make: &dyn Fn(&mut Rng) -> SearchRequest| -> Result<Value> {
        let mut v = Vec::new();
        for i in 0..220 {
            let req = make(&mut r);
            let t = Instant::now();
            m.indexing().search(&req)?;
            if i >= 20 {
                v.push(ms(t));
            }
        }
        Ok(pct(v))
    };
    let words = |r: &mut Rng, n: usize| -> String {
        (0..n)
            .map(|_| vocab.words[200 + r.below(3000) as usize].clone())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let bm25 = run(&|r| {
        let n = 2 + r.below(2) as usize;
        let mut q = SearchRequest::new(&words(r, n));
        q.mode = Some("bm25".into());
        q
    })?;
    let exact = run(&|r| {
        let w = words(r, 2);
        let mut q = SearchRequest::new(&w);
        q.mode = Some("exact".into());
        q
    })?;
    let bm25_no_context = run(&|r| {
        let n = 2 + r.below(2) as usize;
        let mut q = SearchRequest::new(&words(r, n));
        q.mode = Some("bm25".into());
        q.context = Some(0);
        q
    })?;
    let filtered = run(&|r| {
        let mut q = SearchRequest::new(&words(r, 2));
        q.mode = Some("bm25".into());
        q.project = Some(format!("project-{}", r.below(10)));
        q
    })?;
    // As of a time: 100 categories of 5 versions each, then the same BM25 searches now and as
    // of now (every category indexed in memory from its history for the search).
    let mut w = Rng(17);
    for c in 0..100 {
        for v in 0..5 {
            m.categories().write(&WriteRequest {
                category: format!("cat-{c:03}"),
                data: json!({ format!("k{v}"): vocab.sentence(&mut w, 8) }),
                merge: true,
                ..Default::default()
            })?;
        }
    }
    let then = memdir_store::clock::rfc3339(memdir_store::clock::now_ms());
    let bm25_categories = run(&|r| {
        let mut q = SearchRequest::new(&words(r, 2));
        q.mode = Some("bm25".into());
        q
    })?;
    let as_of = run(&|r| {
        let mut q = SearchRequest::new(&words(r, 2));
        q.mode = Some("bm25".into());
        q.as_of = Some(then.clone());
        q
    })?;
    // First search of a fresh CLI process.
    let bin = memdir_bin();
    let mut first = Vec::new();
    for _ in 0..10 {
        let q = words(&mut r, 2);
        let t = Instant::now();
        let st = Command::new(&bin)
            .args([
                "--dir",
                &dir.display().to_string(),
                "search",
                &q,
                "--limit",
                "5",
            ])
            .stdout(Stdio::null())
            .status()
            .expect("run memdir");
        assert!(st.success());
        first.push(ms(t));
    }
    // Catch-up cost after a batch of 1000 writes.
    let mut catchup = Vec::new();
    for k in 0..5 {
        let batch: Vec<NewChunk> = (0..1000)
            .map(|i| NewChunk {
                session_id: format!("late-{k}-{}", i % 10),
                content: vocab.sentence(&mut r, 30),
                project: None,
                metadata: None,
                ts: None,
                source_id: None,
                supersedes: None,
            })
            .collect();
        m.sessions().ingest(&batch)?;
        let t = Instant::now();
        m.indexing()
            .search(&SearchRequest::new(&words(&mut r, 2)))?;
        catchup.push(ms(t));
    }
    Ok(json!({
        "chunks": chunks,
        "fill_seconds": fill.map(round),
        "bm25_with_100_categories_of_5_versions": bm25_categories,
        "bm25_as_of_with_100_categories_of_5_versions": as_of,
        "reindex": {"seconds": round(reindex_s), "result": re},
        "index_bytes": index_bytes,
        "bm25_2_3_terms_limit5_context3": bm25,
        "bm25_2_3_terms_limit5_no_context": bm25_no_context,
        "exact_phrase_limit5_context3": exact,
        "bm25_filtered_by_project": filtered,
        "first_search_fresh_cli_process": pct(first),
        "search_after_1000_writes": pct(catchup),
    }))
}

/// Notes beside a session corpus: BM25 search before and after `--notes` notes are written (of
/// three heading sections of 30 words each, under 100 folders), searches of notes only, and
/// the time of a note write, an edit and a memory-tool view.
fn bench_notes(args: &[String]) -> Result<Value> {
    let (_tmp, dir) = dir_arg(args);
    let chunks = arg(args, "--chunks", 100_000);
    let notes = arg(args, "--notes", 10_000);
    let (m, _) = ensure_corpus(&dir, chunks)?;
    m.indexing().refresh_index()?;
    let vocab = Vocab::new(20_000);
    let words = |r: &mut Rng, n: usize| -> String {
        (0..n)
            .map(|_| vocab.words[200 + r.below(3000) as usize].clone())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let run = |kind: Option<&str>| -> Result<Value> {
        let mut r = Rng(5);
        let mut v = Vec::new();
        for i in 0..420 {
            let n = 2 + r.below(2) as usize;
            let mut q = SearchRequest::new(&words(&mut r, n));
            q.mode = Some("bm25".into());
            q.kind = kind.map(str::to_string);
            let t = Instant::now();
            m.indexing().search(&q)?;
            if i >= 20 {
                v.push(ms(t));
            }
        }
        Ok(pct(v))
    };
    let before = run(None)?;
    let chunks_before = run(Some("chunk"))?;
    let cx = m.cx();
    let mut r = Rng(11);
    let mut write = Vec::new();
    let t_all = Instant::now();
    for i in 0..notes {
        let text = format!(
            "# Note {i}\n{}\n\n## Details\n{}\n\n## Decisions\n{}\n",
            vocab.sentence(&mut r, 30),
            vocab.sentence(&mut r, 30),
            vocab.sentence(&mut r, 30)
        );
        let t = Instant::now();
        cx.notes().write(&memdir_api::NoteWriteRequest {
            path: format!("folder-{:02}/note-{i:05}.md", i % 100),
            text,
            ..Default::default()
        })?;
        write.push(ms(t));
    }
    let fill_s = t_all.elapsed().as_secs_f64();
    let t = Instant::now();
    m.indexing().search(&SearchRequest::new("warm"))?;
    let catch_up_ms = ms(t);
    let after = run(None)?;
    let chunks_after = run(Some("chunk"))?;
    let notes_only = run(Some("note"))?;
    let mut edit = Vec::new();
    let mut view = Vec::new();
    for i in 0..200 {
        let path = format!("folder-{:02}/note-{i:05}.md", i % 100);
        let t = Instant::now();
        cx.notes().append(&memdir_api::NoteAppendRequest {
            path: path.clone(),
            text: vocab.sentence(&mut r, 10),
            ..Default::default()
        })?;
        edit.push(ms(t));
        let t = Instant::now();
        cx.notes().memory_tool(&memdir_api::MemoryToolRequest {
            command: "view".into(),
            path: Some(format!("/memories/{path}")),
            ..Default::default()
        })?;
        view.push(ms(t));
    }
    let ratio = |a: &Value, b: &Value| {
        round(a["p50_ms"].as_f64().unwrap_or(0.0) / b["p50_ms"].as_f64().unwrap_or(1.0))
    };
    Ok(json!({
        "chunks": chunks,
        "notes": notes,
        "bm25_before_notes": before,
        "bm25_with_notes": after,
        "bm25_ratio_with_notes": ratio(&after, &before),
        "bm25_notes_only": notes_only,
        "bm25_chunks_only_before_notes": chunks_before,
        "bm25_chunks_only_with_notes": chunks_after,
        "bm25_chunks_only_ratio_with_notes": ratio(&chunks_after, &chunks_before),
        "note_write": pct(write),
        "notes_fill_seconds": round(fill_s),
        "first_search_after_fill_ms": round(catch_up_ms),
        "note_append": pct(edit),
        "memory_tool_view_file": pct(view),
    }))
}

struct Client {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    out: BufReader<std::process::ChildStdout>,
    id: u64,
    /// The last answer as it came over the wire.
    line: String,
}

impl Client {
    fn start(dir: &Path) -> (Client, f64) {
        let t = Instant::now();
        let mut child = Command::new(memdir_bin())
            .args(["--dir", &dir.display().to_string(), "serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn memdir serve");
        let stdin = child.stdin.take().expect("stdin");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut c = Client {
            child,
            stdin,
            out,
            id: 0,
            line: String::new(),
        };
        c.request("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}));
        let init_ms = ms(t);
        writeln!(
            c.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .expect("write");
        (c, init_ms)
    }
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        )
        .expect("write");
        self.stdin.flush().expect("flush");
        loop {
            let mut line = String::new();
            self.out.read_line(&mut line).expect("read");
            let v: Value = serde_json::from_str(&line).expect("json");
            if v["id"] == json!(self.id) {
                self.line = line;
                return v;
            }
        }
    }
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let v = self.request("tools/call", json!({"name": tool, "arguments": args}));
        assert!(v["result"]["isError"] != json!(true), "{v}");
        v
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bench_mcp(args: &[String]) -> Result<Value> {
    let (_tmp, dir) = dir_arg(args);
    let chunks = arg(args, "--chunks", 100_000);
    let (m, _) = ensure_corpus(&dir, chunks)?;
    m.indexing().refresh_index()?;
    drop(m);
    let vocab = Vocab::new(20_000);
    let mut r = Rng(3);
    // A fresh `memdir serve` each time: `initialize`, then its first search.
    let (mut inits, mut firsts) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        let (mut c, init) = Client::start(&dir);
        inits.push(init);
        let q = vocab.query2(&mut r);
        let t = Instant::now();
        c.call("memory_search", json!({"query": q, "limit": 5}));
        firsts.push(ms(t));
    }
    let (mut c, _) = Client::start(&dir);
    c.call("memory_search", json!({"query": "warm up"}));
    let mut search = Vec::new();
    let (mut wire, mut read) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        let q = vocab.query2(&mut r);
        let t = Instant::now();
        let v = c.call("memory_search", json!({"query": q, "limit": 5}));
        search.push(ms(t));
        wire.push(c.line.trim_end().to_string());
        read.push(model_reads(&v));
    }
    let long = long_answers()?;
    let mut ingest = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        c.call(
            "memory_ingest",
            json!({"session_id": "mcp-bench", "content": vocab.sentence(&mut r, 30)}),
        );
        ingest.push(ms(t));
    }
    // Freshness: a search for a word only the write just acknowledged holds (it must be
    // found), and a search for other words right after a write, against plain searches
    // taken in the same rounds.
    let (mut fresh, mut after, mut plain) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..200 {
        let word = format!("freshword{i}x{}", r.below(1_000_000));
        c.call(
            "memory_ingest",
            json!({"session_id": "mcp-fresh", "content": format!("{} {word}", vocab.sentence(&mut r, 20))}),
        );
        let t = Instant::now();
        let v = c.call("memory_search", json!({"query": word, "limit": 5}));
        fresh.push(ms(t));
        assert!(
            v.to_string().contains(&word),
            "a search missed the write just acknowledged"
        );
        c.call(
            "memory_ingest",
            json!({"session_id": "mcp-fresh", "content": vocab.sentence(&mut r, 20)}),
        );
        let q = vocab.query2(&mut r);
        let t = Instant::now();
        c.call("memory_search", json!({"query": q, "limit": 5}));
        after.push(ms(t));
        let q = vocab.query2(&mut r);
        let t = Instant::now();
        c.call("memory_search", json!({"query": q, "limit": 5}));
        plain.push(ms(t));
    }
    // The same with an agent's pause (50 ms) after each answer: the writes are indexed in
    // the background meanwhile.
    let (mut paused_after, mut paused_plain) = (Vec::new(), Vec::new());
    let pause = std::time::Duration::from_millis(50);
    for _ in 0..100 {
        c.call(
            "memory_ingest",
            json!({"session_id": "mcp-fresh", "content": vocab.sentence(&mut r, 20)}),
        );
        for list in [&mut paused_after, &mut paused_plain] {
            std::thread::sleep(pause);
            let q = vocab.query2(&mut r);
            let t = Instant::now();
            c.call("memory_search", json!({"query": q, "limit": 5}));
            list.push(ms(t));
        }
    }
    let p50 = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok(json!({
        "chunks": chunks,
        "search_for_the_write_just_acknowledged": pct(fresh.clone()),
        "search_for_other_words_after_a_write": pct(after.clone()),
        "a_search_with_no_write_before_it": pct(plain.clone()),
        "freshness_ratio": round(p50(&after) / p50(&plain)),
        "freshness_ratio_own_word": round(p50(&fresh) / p50(&plain)),
        "search_50ms_after_a_write": pct(paused_after.clone()),
        "search_50ms_after_a_search": pct(paused_plain.clone()),
        "freshness_ratio_after_a_pause": round(p50(&paused_after) / p50(&paused_plain)),
        "initialize_fresh_process": pct(inits),
        "first_search_after_serve_starts": pct(firsts),
        "memory_search_round_trip": pct(search),
        "memory_ingest_round_trip": pct(ingest),
        "memory_search_answer_wire": sizes(&wire),
        "memory_search_answer_model_reads": sizes(&read),
        "memory_search_answer_long_chunks": long,
    }))
}

/// The resident memory of a `memdir serve` process (`/proc/PID/status`), in MiB: all of it,
/// the anonymous part (the heap) and the file-backed part (the binary's pages, the mmapped
/// index), and the peak.
fn server_memory(pid: u32) -> Value {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    json!({
        "rss_mib": round(kib("VmRSS") / 1024.0),
        "anonymous_mib": round(kib("RssAnon") / 1024.0),
        "file_backed_mib": round(kib("RssFile") / 1024.0),
        "peak_mib": round(kib("VmHWM") / 1024.0),
    })
}

/// A server's resident memory through a long session of default searches (`--searches`, at
/// `--chunks`): after `initialize`, after the first search, and after every tenth of the run.
fn bench_rss(args: &[String]) -> Result<Value> {
    let (_tmp, dir) = dir_arg(args);
    let chunks = arg(args, "--chunks", 10_000);
    let searches = arg(args, "--searches", 10_000).max(10);
    let (m, _) = ensure_corpus(&dir, chunks)?;
    m.indexing().refresh_index()?;
    drop(m);
    let vocab = Vocab::new(20_000);
    let mut r = Rng(5);
    let (mut c, _) = Client::start(&dir);
    let pid = c.child.id();
    let started = server_memory(pid);
    c.call("memory_search", json!({"query": vocab.query2(&mut r)}));
    let first = server_memory(pid);
    let mut along = Vec::new();
    let mut times = Vec::new();
    for i in 1..=searches {
        let t = Instant::now();
        c.call("memory_search", json!({"query": vocab.query2(&mut r)}));
        times.push(ms(t));
        if i % (searches / 10) == 0 {
            along.push(json!({"searches": i, "memory": server_memory(pid)}));
        }
    }
    Ok(json!({
        "chunks": chunks,
        "searches": searches,
        "after_initialize": started,
        "after_the_first_search": first,
        "along_the_run": along,
        "memory_search_round_trip": pct(times),
    }))
}

/// What a model reads of a tool result: clients hand it either the structured content or the
/// text content (one or the other, never both); the larger of the two is counted.
fn model_reads(v: &Value) -> String {
    let text: String = v["result"]["content"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["text"].as_str()).collect())
        .unwrap_or_default();
    let structured = match &v["result"]["structuredContent"] {
        Value::Null => String::new(),
        s => s.to_string(),
    };
    if structured.len() > text.len() {
        structured
    } else {
        text
    }
}

/// Default search answers over a store of chat-length chunks (150 words, about 1,000
/// characters): the size of an answer must stay bounded whatever the chunks' length.
fn long_answers() -> Result<Value> {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("store");
    let m = Memdir::open(&dir)?;
    let vocab = Vocab::new(20_000);
    let mut r = Rng(77);
    for s in 0..20 {
        let batch: Vec<NewChunk> = (0..100)
            .map(|_| NewChunk {
                session_id: format!("long-{s:02}"),
                content: vocab.sentence(&mut r, 150),
                project: None,
                metadata: None,
                ts: None,
                source_id: None,
                supersedes: None,
            })
            .collect();
        m.sessions().ingest(&batch)?;
    }
    m.indexing().refresh_index()?;
    drop(m);
    let (mut c, _) = Client::start(&dir);
    let (mut wire, mut read) = (Vec::new(), Vec::new());
    for _ in 0..50 {
        let q = vocab.query2(&mut r);
        let v = c.call("memory_search", json!({"query": q, "limit": 5}));
        wire.push(c.line.trim_end().to_string());
        read.push(model_reads(&v));
    }
    Ok(json!({"chunk_words": 150, "wire": sizes(&wire), "model_reads": sizes(&read)}))
}

/// A minimal HTTP/1.1 keep-alive client for loopback load.
struct HttpConn {
    stream: BufReader<std::net::TcpStream>,
    host: String,
}

impl HttpConn {
    fn connect(addr: &str) -> HttpConn {
        let s = std::net::TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        HttpConn {
            stream: BufReader::new(s),
            host: addr.to_string(),
        }
    }

    fn post(&mut self, path: &str, body: &Value) -> (u16, Value) {
        let body = body.to_string();
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.stream
            .get_mut()
            .write_all(req.as_bytes())
            .expect("send");
        let mut status = String::new();
        self.stream.read_line(&mut status).expect("status line");
        let code: u16 = status
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line).expect("header");
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut buf = vec![0u8; len];
        std::io::Read::read_exact(&mut self.stream, &mut buf).expect("body");
        (code, serde_json::from_slice(&buf).unwrap_or(Value::Null))
    }
}

/// REST search and ingest under a loopback load of 8 concurrent clients.
fn bench_http(args: &[String]) -> Result<Value> {
    let (_tmp, dir) = dir_arg(args);
    let chunks = arg(args, "--chunks", 100_000);
    let seconds = arg(args, "--seconds", 30) as u64;
    let (m, _) = ensure_corpus(&dir, chunks)?;
    m.indexing().refresh_index()?;
    drop(m);
    let mut child = Command::new(memdir_bin())
        .args([
            "--dir",
            &dir.display().to_string(),
            "serve",
            "--transport",
            "http",
            "--port",
            "0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn memdir serve --transport http");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    // The server names its directory first, then the address it listens on.
    while !line.contains("http://") {
        line.clear();
        assert!(err.read_line(&mut line).expect("listening line") > 0);
    }
    let addr = line
        .trim()
        .rsplit("http://")
        .next()
        .expect("address")
        .to_string();
    let vocab = std::sync::Arc::new(Vocab::new(20_000));
    let deadline = Instant::now() + std::time::Duration::from_secs(seconds);
    let workers: Vec<_> = (0..8)
        .map(|w| {
            let addr = addr.clone();
            let vocab = vocab.clone();
            std::thread::spawn(move || {
                let mut c = HttpConn::connect(&addr);
                let mut r = Rng(1000 + w);
                let (mut search, mut ingest, mut acked) = (Vec::new(), Vec::new(), Vec::new());
                let (mut own, mut unseen) = (Vec::new(), 0usize);
                let mut i = 0u64;
                while Instant::now() < deadline {
                    let q = vocab.query2(&mut r);
                    let t = Instant::now();
                    let (code, _) = c.post("/search", &json!({"query": q, "limit": 5}));
                    assert_eq!(code, 200);
                    search.push(ms(t));
                    // A write with a word of its own, then a search for that word: it must be
                    // found at once.
                    i += 1;
                    let mark = format!("fresh{w}x{i}");
                    let t = Instant::now();
                    let (code, v) = c.post("/ingest", &json!({"session_id": format!("http-{w}"), "content": format!("{} {mark}", vocab.sentence(&mut r, 30))}));
                    ingest.push(ms(t));
                    if code == 200 {
                        let pos = v["position"].as_u64().expect("position");
                        acked.push(pos);
                        let t = Instant::now();
                        let (code, v) = c.post("/search", &json!({"query": mark, "limit": 5}));
                        assert_eq!(code, 200);
                        own.push(ms(t));
                        let found = v["results"].as_array().is_some_and(|a| {
                            a.iter().any(|h| {
                                h["session_id"] == json!(format!("http-{w}"))
                                    && h["position"] == json!(pos)
                            })
                        });
                        if !found {
                            unseen += 1;
                        }
                    }
                }
                (search, ingest, acked, own, unseen)
            })
        })
        .collect();
    let mut search = Vec::new();
    let mut ingest = Vec::new();
    let mut own_search = Vec::new();
    let mut unseen = 0usize;
    let mut lost = 0usize;
    let mut acked_total = 0usize;
    for (w, h) in workers.into_iter().enumerate() {
        let (s, i, acked, own, missed) = h.join().expect("worker");
        // A fresh connection: the server closes one that sends nothing for 10 s.
        let mut conn = HttpConn::connect(&addr);
        search.extend(s);
        ingest.extend(i);
        own_search.extend(own);
        unseen += missed;
        acked_total += acked.len();
        let (_, v) = conn.post(
            "/fetch",
            &json!({"session_id": format!("http-{w}"), "limit": 1000}),
        );
        let mut have: Vec<u64> = v["chunks"]
            .as_array()
            .map(|a| a.iter().filter_map(|c| c["position"].as_u64()).collect())
            .unwrap_or_default();
        let total = v["total"].as_u64().unwrap_or(0);
        let mut next = v["next_position"].as_u64();
        while let Some(p) = next {
            let (_, v) = conn.post(
                "/fetch",
                &json!({"session_id": format!("http-{w}"), "position": p, "limit": 1000}),
            );
            have.extend(
                v["chunks"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|c| c["position"].as_u64())
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default(),
            );
            next = v["next_position"].as_u64();
        }
        have.sort();
        lost += acked
            .iter()
            .filter(|p| have.binary_search(p).is_err())
            .count();
        assert_eq!(have.len() as u64, total);
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(json!({
        "chunks": chunks,
        "clients": 8,
        "seconds": seconds,
        "rest_search": pct(search),
        "rest_search_for_own_write_just_acknowledged": pct(own_search),
        "acknowledged_writes_not_found_by_the_next_search": unseen,
        "rest_ingest": pct(ingest),
        "acknowledged_writes": acked_total,
        "acknowledged_writes_missing_afterwards": lost,
    }))
}

/// A search right after an acknowledged write, in-process, at `--chunks` chunks: each round
/// ingests one chunk carrying a word of its own and searches for that word (it must be found),
/// then ingests another and searches for ordinary words.
/// Merge-write latency by category size: for each size N, a category written whole with N
/// keys; then `--writes` rounds of one durable merge write of one new key into each category
/// in turn (a key that sorts right after a random existing one, so it lands anywhere in the
/// file), then as many rounds of a read followed by a merge write (the write timed). The
/// sizes take turns within each round, so a noisy machine slows them alike and their ratio
/// holds, in an order drawn anew for each round: work a write leaves to the background (the
/// replaced file freed) lands on whichever write follows, not always on the same size.
fn bench_merge(args: &[String]) -> Result<Value> {
    let (_tmp, dir) = dir_arg(args);
    let writes = arg(args, "--writes", 30);
    // A pause before each timed write, as an agent's writes come between its turns: what a
    // write leaves to the background is done by the next one.
    let pause = std::time::Duration::from_millis(arg(args, "--pause-ms", 0) as u64);
    let sizes: Vec<usize> = args
        .iter()
        .position(|a| a == "--sizes")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| vec![10, 100, 1000, 10_000]);
    let sizes_len = sizes.len();
    let m = Memdir::open(&dir)?;
    let vocab = Vocab::new(5_000);
    let mut r = Rng(23);
    let category = |n: usize| format!("size-{n}");
    for &n in &sizes {
        let data: serde_json::Map<String, Value> = (0..n)
            .map(|k| (format!("key-{k:05}"), json!(vocab.sentence(&mut r, 8))))
            .collect();
        m.categories().write(&WriteRequest {
            category: category(n),
            data: Value::Object(data),
            ..Default::default()
        })?;
    }
    // One durable merge write of one new key, timed.
    let mut merge_one = |n: usize, key: String| -> Result<f64> {
        let data = json!({ key: vocab.sentence(&mut r, 8) });
        std::thread::sleep(pause);
        let t = Instant::now();
        m.categories().write(&WriteRequest {
            category: category(n),
            data,
            merge: true,
            ..Default::default()
        })?;
        Ok(ms(t))
    };
    let mut at = Rng(29);
    let mut order_rng = Rng(31);
    let mut order = move || {
        let mut o: Vec<usize> = (0..sizes_len).collect();
        for i in (1..o.len()).rev() {
            o.swap(i, order_rng.below(i as u64 + 1) as usize);
        }
        o
    };
    let mut lat: Vec<Vec<f64>> = vec![Vec::with_capacity(writes); sizes.len()];
    for k in 0..writes {
        for i in order() {
            let n = sizes[i];
            let key = format!("key-{:05}-new-{k:05}", at.below(n as u64));
            lat[i].push(merge_one(n, key)?);
        }
    }
    // An agent often reads a category before it merges into it: the merge that follows a
    // read, timed alone.
    let mut after_read: Vec<Vec<f64>> = vec![Vec::with_capacity(writes); sizes.len()];
    for k in 0..writes {
        for i in order() {
            let n = sizes[i];
            m.categories().read(&ReadRequest {
                category: category(n),
                fields: None,
                version: None,
                as_of: None,
            })?;
            let key = format!("key-{:05}-read-{k:05}", at.below(n as u64));
            after_read[i].push(merge_one(n, key)?);
        }
    }
    let mut out = serde_json::Map::new();
    // Each size's p50 against the smallest size's, from the same rounds.
    let p50: Vec<Option<f64>> = lat
        .iter()
        .map(|v| pct(v.clone())["p50_ms"].as_f64())
        .collect();
    let smallest = sizes
        .iter()
        .enumerate()
        .min_by_key(|(_, n)| **n)
        .map(|(i, _)| i);
    for (i, &n) in sizes.iter().enumerate() {
        let file = dir.join("categories").join(format!("{}.json", category(n)));
        let history = dir.join("history").join(category(n));
        let ratio = match (p50[i], smallest.and_then(|s| p50[s])) {
            (Some(a), Some(b)) if b > 0.0 => Some((a / b * 100.0).round() / 100.0),
            _ => None,
        };
        out.insert(
            format!("{n}_keys"),
            json!({
                "merge_write": pct(std::mem::take(&mut lat[i])),
                "merge_write_after_a_read": pct(std::mem::take(&mut after_read[i])),
                "p50_to_smallest": ratio,
                "category_file_bytes": std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0),
                "history_bytes": dir_size(&history),
            }),
        );
    }
    Ok(Value::Object(out))
}

fn bench_fresh(args: &[String]) -> Result<Value> {
    let (_tmp, dir) = dir_arg(args);
    let chunks = arg(args, "--chunks", 100_000);
    let (m, _) = ensure_corpus(&dir, chunks)?;
    m.indexing().refresh_index()?;
    // `--server`: as `memdir serve` runs, the catch-ups kept in memory between durable commits.
    let server = args.iter().any(|a| a == "--server");
    let m = if server {
        drop(m);
        let m = Memdir::open_lazy_with(
            &dir,
            memdir_engine::service::Settings {
                index_tail_in_memory: true,
                ..memdir_engine::service::Settings::default()
            },
        );
        m.indexing().refresh_index()?;
        m
    } else {
        m
    };
    let vocab = Vocab::new(20_000);
    let mut r = Rng(17);
    let (mut own, mut other, mut write) = (Vec::new(), Vec::new(), Vec::new());
    let mut missing = 0usize;
    for i in 0..220 {
        let mark = format!("fresh{i}mark");
        let session = format!("session-{:05}", r.below(50));
        let t = Instant::now();
        let ack = m.sessions().ingest_one(NewChunk {
            session_id: session.clone(),
            content: format!("{} {mark}", vocab.sentence(&mut r, 30)),
            project: None,
            metadata: None,
            ts: None,
            source_id: None,
            supersedes: None,
        })?;
        let w = ms(t);
        let t = Instant::now();
        let res = m.indexing().search(&SearchRequest::new(&mark))?;
        let s = ms(t);
        let found = res.results.iter().any(|h| {
            matches!(h, memdir_api::SearchHit::Chunk { session_id, position, .. }
                if *session_id == session && *position == ack.position)
        });
        missing += usize::from(!found);
        m.sessions().ingest_one(NewChunk {
            session_id: session,
            content: vocab.sentence(&mut r, 30),
            project: None,
            metadata: None,
            ts: None,
            source_id: None,
            supersedes: None,
        })?;
        let q = vocab.query2(&mut r);
        let t = Instant::now();
        m.indexing().search(&SearchRequest::new(&q))?;
        let o = ms(t);
        if i >= 20 {
            write.push(w);
            own.push(s);
            other.push(o);
        }
    }
    Ok(json!({
        "chunks": chunks,
        "catch_ups_kept_in_memory": server,
        "ingest_single": pct(write),
        "search_for_the_write_just_acknowledged": pct(own),
        "search_for_other_words_after_a_write": pct(other),
        "acknowledged_writes_not_found": missing,
    }))
}

/// Recall@k on the fixture in `bench/fixtures/recall.json`: conversations of short turns, and
/// questions whose evidence sits in given turns.
/// A recall-fixture conversation's turns: (session index, turn index, text).
fn fixture_turns(conv: &Value) -> Vec<(u64, u64, String)> {
    let mut out = Vec::new();
    for (si, session) in conv["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .enumerate()
    {
        for (ti, turn) in session.as_array().expect("turns").iter().enumerate() {
            out.push((
                si as u64,
                ti as u64,
                turn.as_str().expect("turn").to_string(),
            ));
        }
    }
    out
}

/// A recall-fixture conversation as chunks: session `<conversation>-s<i>`, project the
/// conversation's id.
fn fixture_chunks(conv: &Value) -> Vec<NewChunk> {
    let cid = conv["id"].as_str().expect("id");
    fixture_turns(conv)
        .into_iter()
        .map(|(si, _, content)| NewChunk {
            session_id: format!("{cid}-s{si}"),
            content,
            project: Some(cid.to_string()),
            metadata: None,
            ts: None,
            source_id: None,
            supersedes: None,
        })
        .collect()
}

fn bench_recall(_args: &[String]) -> Result<Value> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/fixtures/recall.json"),
    )
    .expect("fixture");
    let fx: Value = serde_json::from_str(&text).expect("fixture json");
    let mut out = serde_json::Map::new();
    let tmp = tempfile::tempdir().expect("temp dir");
    let m = Memdir::open(tmp.path().join("store"))?;
    for conv in fx["conversations"].as_array().expect("conversations") {
        m.sessions().ingest(&fixture_chunks(conv))?;
    }
    // (label, previous-turn weight, neighbour share, session share)
    let default_label = "session-aware: prev 0.5, neighbour 0.25, session 0.5 (default)";
    let variants: &[(&str, f32, f32, f32)] = &[
        ("plain_bm25", 0.0, 0.0, 0.0),
        ("prev_turn_0.3", 0.3, 0.0, 0.0),
        ("prev_turn_0.5", 0.5, 0.0, 0.0),
        ("prev_turn_1.0", 1.0, 0.0, 0.0),
        ("prev 0.5 + neighbour 0.25", 0.5, 0.25, 0.0),
        ("prev 0.5 + session 0.5", 0.5, 0.0, 0.5),
        (default_label, 0.5, 0.25, 0.5),
        ("no prev + neighbour 0.25 + session 0.5", 0.0, 0.25, 0.5),
    ];
    for &(label, ctx, nb, ss) in variants {
        let tune = |r: &mut memdir_index::search::Request| {
            r.context_weight = ctx;
            r.neighbour_share = nb;
            r.session_share = ss;
        };
        let (mut hits5, mut hits10, mut total) = (0usize, 0usize, 0usize);
        for conv in fx["conversations"].as_array().expect("conversations") {
            let cid = conv["id"].as_str().expect("id");
            for q in conv["questions"].as_array().expect("questions") {
                let mut req = SearchRequest::new(q["question"].as_str().expect("question"));
                req.limit = 10;
                req.context = Some(0);
                req.mode = Some("bm25".into());
                req.project = Some(cid.to_string());
                let res = m.indexing().search_tuned(&req, tune)?;
                let ids: Vec<(String, u64)> = res
                    .results
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
                        hits10 += 1;
                        if rank < 5 {
                            hits5 += 1;
                        }
                    }
                }
            }
        }
        let w5 = window_recall(&m, &fx, 5, &tune)?;
        let w10 = window_recall(&m, &fx, 10, &tune)?;
        out.insert(
            label.into(),
            json!({
                "evidence": total,
                "recall@5": round(hits5 as f64 / total as f64),
                "recall@10": round(hits10 as f64 / total as f64),
                "in_windows@5": w5["evidence_in_answer"],
                "in_windows@10": w10["evidence_in_answer"],
            }),
        );
        if label == default_label {
            out.insert("default answer with context windows".into(), w5);
        }
    }
    Ok(Value::Object(out))
}

/// The default answer (5 hits, context windows of 3): how often the evidence turn is a hit or
/// a line of a hit's window, and how much of its text the answer shows (excerpts are cut; the
/// same figure under the former 500-character cut is given for comparison).
fn window_recall(
    m: &Memdir,
    fx: &Value,
    limit: usize,
    tune: &dyn Fn(&mut memdir_index::search::Request),
) -> Result<Value> {
    let (mut total, mut as_hit, mut in_window) = (0usize, 0usize, 0usize);
    let (mut shown, mut shown_500) = (0f64, 0f64);
    for conv in fx["conversations"].as_array().expect("conversations") {
        let cid = conv["id"].as_str().expect("id");
        let sessions = conv["sessions"].as_array().expect("sessions");
        for q in conv["questions"].as_array().expect("questions") {
            let mut req = SearchRequest::new(q["question"].as_str().expect("question"));
            req.mode = Some("bm25".into());
            req.project = Some(cid.to_string());
            req.limit = limit;
            let res = m.indexing().search_tuned(&req, tune)?;
            for ev in q["evidence"].as_array().expect("evidence") {
                total += 1;
                let (si, turn) = (
                    ev[0].as_u64().expect("session"),
                    ev[1].as_u64().expect("turn"),
                );
                let full = sessions[si as usize][turn as usize]
                    .as_str()
                    .expect("turn text");
                let want = format!("{cid}-s{si}");
                let mut text = None;
                for r in &res.results {
                    if let memdir_api::SearchHit::Chunk {
                        session_id,
                        position,
                        content,
                        context,
                        ..
                    } = r
                        && *session_id == want
                    {
                        if *position == turn {
                            as_hit += 1;
                            text = Some(content.clone());
                            break;
                        }
                        if let Some(c) = context.iter().find(|c| c.position == turn) {
                            text.get_or_insert_with(|| c.content.clone());
                        }
                    }
                }
                if let Some(t) = text {
                    in_window += 1;
                    let n = full.chars().count().max(1) as f64;
                    shown += t.trim_matches('…').chars().count() as f64 / n;
                    shown_500 += full.chars().count().min(500) as f64 / n;
                }
            }
        }
    }
    let seen = in_window.max(1) as f64;
    Ok(json!({
        "evidence": total,
        "limit": limit,
        "evidence_is_a_hit": round(as_hit as f64 / total as f64),
        "evidence_in_answer": round(in_window as f64 / total as f64),
        "evidence_text_shown": round(shown / seen),
        "evidence_text_shown_under_500_char_cut": round(shown_500 / seen),
    }))
}

/// `import`: a synthetic Claude Code history (`--turns` user/assistant records over
/// `--sessions` transcripts, with the tool calls, results, thinking and progress records a real
/// one holds between them), imported by the `memdir` binary; then imported again (nothing new).
fn bench_import(args: &[String]) -> Result<Value> {
    if args.iter().any(|a| a == "local-memory") {
        return bench_import_local_memory(args);
    }
    let (_tmp, dir) = dir_arg(args);
    let turns = arg(args, "--turns", 100_000);
    let sessions = arg(args, "--sessions", 200).max(1);
    let src = dir.with_file_name("claude-home");
    let vocab = Vocab::new(20_000);
    let mut rng = Rng(11);
    let per = turns.div_ceil(sessions);
    let mut bytes = 0u64;
    for s in 0..sessions {
        let proj = src.join(format!("projects/-home-dev-proj{}", s % 20));
        std::fs::create_dir_all(&proj).expect("create project dir");
        let mut out = String::new();
        for t in 0..per.min(turns.saturating_sub(s * per)) {
            let uuid = format!("{s:08x}-{t:04x}-4000-8000-{:012x}", s * per + t);
            let ts = format!(
                "2026-03-02T{:02}:{:02}:{:02}.000Z",
                (t / 3600) % 24,
                (t / 60) % 60,
                t % 60
            );
            let common = json!({"uuid": uuid, "sessionId": s.to_string(), "cwd": format!("/home/dev/proj{}", s % 20), "gitBranch": "main", "version": "2.0.40", "timestamp": ts, "isSidechain": false});
            let mut rec = common.clone();
            if t % 2 == 0 {
                rec["type"] = json!("user");
                rec["message"] = json!({"role": "user", "content": vocab.sentence(&mut rng, 30)});
            } else {
                rec["type"] = json!("assistant");
                rec["message"] = json!({"role": "assistant", "model": "claude-sonnet-4-5", "id": format!("msg_{t}"), "content": [{"type": "text", "text": vocab.sentence(&mut rng, 60)}]});
                // Noise a real transcript holds between turns.
                let mut call = common.clone();
                call["uuid"] = json!(format!("{uuid}-c"));
                call["type"] = json!("assistant");
                call["message"] = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "cargo test"}}]});
                let mut result = common.clone();
                result["uuid"] = json!(format!("{uuid}-r"));
                result["type"] = json!("user");
                result["message"] = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": vocab.sentence(&mut rng, 200)}]});
                out.push_str(&format!("{call}\n{result}\n"));
            }
            out.push_str(&format!("{rec}\n"));
        }
        bytes += out.len() as u64;
        std::fs::write(proj.join(format!("session-{s:05}.jsonl")), out).expect("write transcript");
    }
    let run = |what: &str| -> Value {
        let start = Instant::now();
        let out = Command::new(memdir_bin())
            .args([
                "--dir",
                dir.to_str().expect("utf-8 path"),
                "import",
                "claude-code",
                src.to_str().expect("utf-8 path"),
            ])
            .output()
            .expect("run memdir import");
        let secs = start.elapsed().as_secs_f64();
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("import prints JSON");
        let chunks = v["chunks"].as_u64().unwrap_or(0);
        json!({"seconds": round(secs), "chunks": chunks, "existing": v["existing"], "chunks_per_s": (chunks as f64 / secs).round()})
    };
    let first = run("first import");
    let second = run("second import");
    Ok(
        json!({"turns": turns, "sessions": sessions, "source_mib": round(bytes as f64 / 1048576.0), "first": first, "again": second}),
    )
}

/// `import local-memory`: a synthetic local-memory database (`--turns` chunks of 30 to 60
/// words over `--sessions` sessions, metadata on every chunk, reasoning on every fourth),
/// imported by the `memdir` binary into a fresh store, then again.
fn bench_import_local_memory(args: &[String]) -> Result<Value> {
    let (_tmp, dir) = dir_arg(args);
    let turns = arg(args, "--turns", 10_000);
    let sessions = arg(args, "--sessions", 50).max(1);
    let src = dir.with_file_name("local-memory.db");
    let _ = std::fs::remove_file(&src);
    let vocab = Vocab::new(20_000);
    let mut rng = Rng(13);
    let per = turns.div_ceil(sessions);
    {
        let mut c = rusqlite::Connection::open(&src).expect("create the database");
        c.execute_batch(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, project TEXT DEFAULT '', start_time TEXT NOT NULL, end_time TEXT, message_count INTEGER DEFAULT 0, total_chars INTEGER DEFAULT 0);
             CREATE TABLE chunks (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, position INTEGER, content TEXT, reasoning TEXT, tool_calls TEXT, tool_call_results TEXT, prev_id INTEGER, next_id INTEGER, metadata TEXT DEFAULT '{}');
             CREATE UNIQUE INDEX idx_chunks_pos_unique ON chunks(session_id, position);
             CREATE TABLE session_summaries (session_id TEXT PRIMARY KEY, title TEXT, message_count INTEGER, start_time TEXT, last_active TEXT, summary TEXT);",
        )
        .expect("schema");
        let tx = c.transaction().expect("transaction");
        for s in 0..sessions {
            let id = format!("sess-{s:05}");
            let start = format!("2026-03-{:02}T{:02}:00:00", 1 + s % 28, s % 24);
            tx.execute(
                "INSERT INTO sessions (id, project, start_time) VALUES (?1, ?2, ?3)",
                rusqlite::params![id, format!("proj{}", s % 20), start],
            )
            .expect("session");
            tx.execute(
                "INSERT INTO session_summaries (session_id, title) VALUES (?1, ?2)",
                rusqlite::params![id, format!("session {s}")],
            )
            .expect("summary");
            for t in 0..per.min(turns.saturating_sub(s * per)) {
                let (who, words) = if t % 2 == 0 {
                    ("User", 30)
                } else {
                    ("Assistant", 60)
                };
                let content = format!("{who}: {}", vocab.sentence(&mut rng, words));
                let reasoning = (t % 4 == 1).then(|| vocab.sentence(&mut rng, 20));
                let role = if t % 2 == 0 { "user" } else { "assistant" };
                tx.execute(
                    "INSERT INTO chunks (session_id, position, content, reasoning, metadata) VALUES (?1, ?2, ?3, ?4, ?5)",
                    rusqlite::params![id, t as i64, content, reasoning, format!("{{\"role\":\"{role}\"}}")],
                )
                .expect("chunk");
            }
        }
        tx.commit().expect("commit");
    }
    let bytes = std::fs::metadata(&src).map(|m| m.len()).unwrap_or(0);
    let run = |what: &str| -> Value {
        let start = Instant::now();
        let out = Command::new(memdir_bin())
            .args([
                "--dir",
                dir.to_str().expect("utf-8 path"),
                "import",
                "local-memory",
                src.to_str().expect("utf-8 path"),
            ])
            .output()
            .expect("run memdir import");
        let secs = start.elapsed().as_secs_f64();
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("import prints JSON");
        let chunks = v["chunks"].as_u64().unwrap_or(0);
        json!({"seconds": round(secs), "chunks": chunks, "existing": v["existing"], "chunks_per_s": (chunks as f64 / secs).round()})
    };
    let first = run("first import");
    let second = run("second import");
    Ok(
        json!({"format": "local-memory", "turns": turns, "sessions": sessions, "source_mib": round(bytes as f64 / 1048576.0), "first": first, "again": second}),
    )
}

/// Base64 of `bytes` (standard alphabet, padded): the body of a data-URL image.
fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len() * 4 / 3 + 4);
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Redaction: cost per MB on several corpora, and what it redacts in text that holds no
/// secret (false positives): the repository's own sources and docs, git hashes, UUIDs,
/// base64 images and synthetic prose. Run from the repository root.
fn bench_redact(_args: &[String]) -> Result<Value> {
    let r = memdir_engine::redact::Redactor::default();
    let mut rng = Rng(0x5eed);
    let vocab = Vocab::new(5000);
    let mut corpora: Vec<(&str, Vec<String>)> = Vec::new();
    // The repository's sources and docs, one text per file (tests, the redactor and this
    // benchmark left out: they hold fake secrets on purpose).
    let mut repo = Vec::new();
    for root in ["src", "bench", "examples", "schema"] {
        for e in walkdir::WalkDir::new(root).into_iter().flatten() {
            let p = e.path();
            if e.file_type().is_file()
                && !p.ends_with("redact.rs")
                && !p.ends_with("bench/main.rs")
                && p.extension()
                    .is_some_and(|x| ["rs", "md", "toml", "json"].contains(&&*x.to_string_lossy()))
                && let Ok(t) = std::fs::read_to_string(p)
            {
                repo.push(t);
            }
        }
    }
    for f in [
        "README.md",
        "ARCHITECTURE.md",
        "STORAGE.md",
        "SECURITY.md",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        if let Ok(t) = std::fs::read_to_string(f) {
            repo.push(t);
        }
    }
    corpora.push(("repository sources and docs", repo));
    let hex = |rng: &mut Rng, n: usize| -> String {
        (0..n)
            .map(|_| char::from_digit(rng.below(16) as u32, 16).unwrap())
            .collect()
    };
    corpora.push((
        "git hashes (40 hex)",
        (0..20_000)
            .map(|_| format!("commit {} fixed it", hex(&mut rng, 40)))
            .collect(),
    ));
    corpora.push((
        "UUIDs",
        (0..20_000)
            .map(|_| {
                format!(
                    "id {}-{}-4{}-a{}-{}",
                    hex(&mut rng, 8),
                    hex(&mut rng, 4),
                    hex(&mut rng, 3),
                    hex(&mut rng, 3),
                    hex(&mut rng, 12)
                )
            })
            .collect(),
    ));
    corpora.push((
        "base64 images",
        (0..200)
            .map(|_| {
                let bytes: Vec<u8> = (0..6000).map(|_| rng.below(256) as u8).collect();
                format!("![x](data:image/png;base64,{})", base64(&bytes))
            })
            .collect(),
    ));
    corpora.push((
        "prose",
        (0..20_000).map(|_| vocab.sentence(&mut rng, 30)).collect(),
    ));
    let mut out = serde_json::Map::new();
    for (name, texts) in &corpora {
        let bytes: usize = texts.iter().map(String::len).sum();
        let mut counts = memdir_engine::redact::Counts::new();
        let mut times = Vec::new();
        for _ in 0..3 {
            counts.clear();
            let t = Instant::now();
            for s in texts {
                std::hint::black_box(r.text(s, &mut counts));
            }
            times.push(ms(t));
        }
        let best = times.iter().cloned().fold(f64::MAX, f64::min);
        let mb = bytes as f64 / 1_048_576.0;
        out.insert(
            name.to_string(),
            json!({
                "texts": texts.len(),
                "mb": round(mb),
                "ms_per_mb": round(best / mb),
                "redacted": counts,
                "redacted_per_mb": round(counts.values().sum::<u64>() as f64 / mb),
            }),
        );
    }
    // Text dense with secrets: the cost when there is much to replace.
    let secret_text: Vec<String> = (0..20_000)
        .map(|i| {
            format!(
                "{} key AKIA{} and PASSWORD=hunter{i} end",
                vocab.sentence(&mut rng, 10),
                hex(&mut rng, 16).to_uppercase()
            )
        })
        .collect();
    let bytes: usize = secret_text.iter().map(String::len).sum();
    let mut counts = memdir_engine::redact::Counts::new();
    let t = Instant::now();
    for s in &secret_text {
        std::hint::black_box(r.text(s, &mut counts));
    }
    let mb = bytes as f64 / 1_048_576.0;
    out.insert(
        "two secrets per line".into(),
        json!({"mb": round(mb), "ms_per_mb": round(ms(t) / mb), "redacted": counts}),
    );
    Ok(Value::Object(out))
}

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let what = args.first().map(String::as_str).unwrap_or("store");
    let started = Instant::now();
    let result = match what {
        "store" => bench_store(&args),
        "search" => bench_search(&args),
        "mcp" => bench_mcp(&args),
        "rss" => bench_rss(&args),
        "recall" => bench_recall(&args),
        "http" => bench_http(&args),
        "fresh" => bench_fresh(&args),
        "merge" => bench_merge(&args),
        "import" => bench_import(&args),
        "bulk" => bench_bulk(&args),
        "redact" => bench_redact(&args),
        "notes" => bench_notes(&args),
        "embeddings" => embeddings::bench_embeddings(&args),
        other => {
            eprintln!(
                "unknown benchmark {other:?}: use store, search, mcp, rss, recall, http, fresh, import, bulk, redact or notes"
            );
            std::process::exit(2);
        }
    };
    match result {
        Ok(v) => {
            let out = json!({"benchmark": what, "machine": machine(), "total_seconds": round(started.elapsed().as_secs_f64()), "figures": v});
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        }
        Err(e) => {
            eprintln!("benchmark failed: {}", e.to_json());
            std::process::exit(1);
        }
    }
}

fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
    });
    json!({"cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1), "cpu": cpu, "os": std::env::consts::OS})
}
