//! The documentation stays true to the tree: every relative Markdown link in the docs points
//! to a file or directory that exists, every repository path that ARCHITECTURE.md's code map
//! names exists, and the two pages a newcomer reads first stay short.
//!
//! The docs checked are README.md, ARCHITECTURE.md, STORAGE.md, SECURITY.md, bench/README.md
//! and every `.md` file under `docs/`. Links to other sites (`http://`, `https://`, `mailto:`)
//! and links to an anchor of the same page are not checked; a link's own `#anchor` is cut off
//! before the file is looked up. Text in code (fenced blocks and backtick spans) is not a
//! link. Paths are relative to the page that holds the link, or to the repository root when
//! they start with `/`, as GitHub reads them.

use std::path::{Path, PathBuf};

/// The repository root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The top-level directories whose paths a backtick span in ARCHITECTURE.md may name.
const REPO_DIRS: &[&str] = &[
    "src/",
    "crates/",
    "tests/",
    "bench/",
    "schema/",
    "assets/",
    "examples/",
    "docs/",
    "scripts/",
];

const README_MAX_BYTES: u64 = 15_000;
const ARCHITECTURE_MAX_BYTES: u64 = 20_000;

/// Every documentation page, relative to the root, sorted.
fn pages() -> Vec<PathBuf> {
    let root = root();
    let mut out: Vec<PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "STORAGE.md",
        "SECURITY.md",
        "bench/README.md",
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect();
    let docs = root.join("docs");
    let mut under_docs: Vec<PathBuf> = walkdir::WalkDir::new(&docs)
        .into_iter()
        .map(|e| e.unwrap_or_else(|e| panic!("walking {}: {e}", docs.display())))
        .filter(|e| e.file_type().is_file())
        .filter(|e| e.path().extension().is_some_and(|x| x == "md"))
        .map(|e| {
            e.path()
                .strip_prefix(&root)
                .expect("invariant: walkdir yields paths under the directory it walks")
                .to_path_buf()
        })
        .collect();
    assert!(
        !under_docs.is_empty(),
        "no Markdown page under {}",
        docs.display()
    );
    under_docs.sort();
    out.extend(under_docs);
    out
}

fn read(rel: &Path) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The text with fenced code blocks and backtick spans blanked out (newlines kept, so line
/// numbers stay right), and the backtick spans themselves with the line each starts on.
fn split_code(text: &str) -> (String, Vec<(usize, String)>) {
    // Fenced blocks first, line by line.
    let blank = |line: &str| -> String {
        line.chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect()
    };
    let mut prose = String::with_capacity(text.len());
    let mut fence: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        let is_fence = marker.len() >= 3 && marker.chars().all(|c| trimmed.starts_with(c));
        if let Some(open) = &fence {
            let closes = is_fence
                && marker.starts_with(open.as_str())
                && trimmed[marker.len()..].trim().is_empty();
            prose.push_str(&blank(line));
            if closes {
                fence = None;
            }
        } else if is_fence {
            prose.push_str(&blank(line));
            fence = Some(marker);
        } else {
            prose.push_str(line);
        }
    }
    // Then backtick spans: a run of n backticks up to the next run of exactly n.
    let chars: Vec<char> = prose.chars().collect();
    let mut out: Vec<char> = chars.clone();
    let mut spans = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && chars[i] == '`' {
            i += 1;
        }
        let n = i - start;
        let mut j = i;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let run = j;
                while j < chars.len() && chars[j] == '`' {
                    j += 1;
                }
                if j - run == n {
                    close = Some(run);
                    break;
                }
            } else {
                j += 1;
            }
        }
        let Some(close) = close else {
            // An unmatched run is literal text.
            continue;
        };
        let content: String = chars[i..close]
            .iter()
            .map(|&c| if c == '\n' { ' ' } else { c })
            .collect();
        spans.push((line, content.trim().to_string()));
        for (o, &c) in out[start..close + n]
            .iter_mut()
            .zip(&chars[start..close + n])
        {
            if c == '\n' {
                line += 1;
            } else {
                *o = ' ';
            }
        }
        i = close + n;
    }
    (out.into_iter().collect(), spans)
}

/// The targets of the Markdown links in `text` (inline links, images and reference
/// definitions), with the line each is on; code is not searched.
fn links(text: &str) -> Vec<(usize, String)> {
    let (prose, _) = split_code(text);
    let mut out = Vec::new();
    let chars: Vec<char> = prose.chars().collect();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\n' {
            line += 1;
        }
        if chars[i] == ']' && chars.get(i + 1) == Some(&'(') {
            // The target runs to the matching parenthesis.
            let mut depth = 1;
            let mut j = i + 2;
            while j < chars.len() && depth > 0 {
                match chars[j] {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                j += 1;
            }
            if depth == 0 {
                // chars[j - 1] is the closing parenthesis.
                let inner: String = chars[i + 2..j - 1].iter().collect();
                let inner = inner.trim();
                let target = match inner.strip_prefix('<') {
                    Some(rest) => rest.split('>').next().unwrap_or(""),
                    // A title may follow the target after white space.
                    None => inner.split_whitespace().next().unwrap_or(""),
                };
                out.push((line, target.to_string()));
            }
        }
        i += 1;
    }
    // Reference definitions: `[label]: target` at the start of a line.
    for (n, l) in prose.lines().enumerate() {
        let t = l.trim_start();
        if l.len() - t.len() > 3 || !t.starts_with('[') {
            continue;
        }
        if let Some(end) = t.find("]:")
            && let Some(target) = t[end + 2..].split_whitespace().next()
        {
            out.push((n + 1, target.trim_matches(['<', '>']).to_string()));
        }
    }
    out
}

/// The file a link target names, relative to the root; `None` for links this test leaves
/// alone (other sites, anchors of the same page).
fn local_target(page: &Path, target: &str) -> Option<PathBuf> {
    let lower = target.to_ascii_lowercase();
    if target.is_empty()
        || target.starts_with('#')
        || lower.starts_with("mailto:")
        || lower.contains("://")
    {
        return None;
    }
    let path = target.split(['#', '?']).next().unwrap_or("");
    if path.is_empty() {
        return None;
    }
    Some(match path.strip_prefix('/') {
        Some(from_root) => PathBuf::from(from_root),
        None => page.parent().unwrap_or(Path::new("")).join(path),
    })
}

/// Whether a backtick span is a repository path rather than code, a store path or a
/// placeholder.
fn repo_path(span: &str) -> Option<&str> {
    let plain = !span.is_empty()
        && !span.chars().any(|c| {
            c.is_whitespace()
                || matches!(c, '<' | '>' | '*' | '{' | '}' | '$' | '~' | '?' | ':' | '|')
        });
    (plain && REPO_DIRS.iter().any(|d| span.starts_with(d))).then_some(span)
}

#[test]
fn every_relative_link_in_the_docs_points_to_a_file() {
    let root = root();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        for (line, target) in links(&read(&page)) {
            let Some(rel) = local_target(&page, &target) else {
                continue;
            };
            checked += 1;
            if !root.join(&rel).exists() {
                broken.push(format!(
                    "{}:{line}: ({target}) -> {} does not exist",
                    page.display(),
                    rel.display()
                ));
            }
        }
    }
    assert!(
        checked > 0,
        "no relative link found in any page: the parser is broken"
    );
    assert!(
        broken.is_empty(),
        "{} broken link(s):\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn every_path_in_the_architecture_code_map_exists() {
    let page = Path::new("ARCHITECTURE.md");
    let (_, spans) = split_code(&read(page));
    let paths: Vec<(usize, &str)> = spans
        .iter()
        .filter_map(|(line, span)| repo_path(span).map(|p| (*line, p)))
        .collect();
    assert!(
        paths.iter().any(|(_, p)| p.starts_with("crates/")),
        "ARCHITECTURE.md names no path under crates/: its code map is missing"
    );
    let missing: Vec<String> = paths
        .iter()
        .filter(|(_, p)| !root().join(p).exists())
        .map(|(line, p)| format!("ARCHITECTURE.md:{line}: `{p}` does not exist"))
        .collect();
    assert!(
        missing.is_empty(),
        "{} path(s) of the code map missing:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn the_readme_and_the_architecture_page_stay_short_enough_to_read_in_one_sitting() {
    for (page, max) in [
        ("README.md", README_MAX_BYTES),
        ("ARCHITECTURE.md", ARCHITECTURE_MAX_BYTES),
    ] {
        let path = root().join(page);
        let len = std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
            .len();
        assert!(
            len <= max,
            "{page} is {len} bytes, over its {max}: move reference material to docs/ or \
             design notes to docs/design/"
        );
    }
}

#[test]
fn links_in_code_are_not_links_and_anchors_and_titles_are_cut_off() {
    let text = "See [the store](STORAGE.md#limits \"Limits\") and [web](https://example.com).\n\
                `[not](a-link.md)` and ![shot](docs/screenshots/search.png)\n\
                ```\n[also not](fenced.md)\n```\n\
                [ref]: <docs/cli.md>\n\
                [same page](#anchor)\n";
    let found: Vec<String> = links(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(
        found,
        [
            "STORAGE.md#limits",
            "https://example.com",
            "docs/screenshots/search.png",
            "#anchor",
            "docs/cli.md",
        ]
    );
    let page = Path::new("docs/design/sync.md");
    assert_eq!(
        local_target(page, "../../STORAGE.md#limits"),
        Some(PathBuf::from("docs/design/../../STORAGE.md"))
    );
    assert_eq!(
        local_target(page, "/README.md"),
        Some(PathBuf::from("README.md"))
    );
    assert_eq!(local_target(page, "#anchor"), None);
    assert_eq!(local_target(page, "https://example.com/x.md"), None);

    let (_, spans) =
        split_code("the `crates/store/src/txn.rs` file, `history/<name>/`, `store::txn`\n");
    let paths: Vec<&str> = spans.iter().filter_map(|(_, s)| repo_path(s)).collect();
    assert_eq!(paths, ["crates/store/src/txn.rs"]);
}
