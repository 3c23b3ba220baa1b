//! The official MCP memory server's knowledge graph (`memory.jsonl`, `$MEMORY_FILE_PATH`):
//! entity and relation lines, rewritten whole by the server on every change.
//!
//! The graph is curated state, not a conversation, so it becomes one category,
//! `mcp-memory-graph`, under the server's own field names (an export back is trivial):
//!
//! ```json
//! {"entities": {"<name>": {"entityType": "…", "observations": ["…"]}},
//!  "relations": [{"from": "…", "relationType": "…", "to": "…"}]}
//! ```
//!
//! Entities are keyed by name; a name on several lines is merged (observations united in
//! file order, the first `entityType` kept). Relations are sorted by (from, relationType,
//! to) and de-duplicated; one whose end is no entity is kept with `"dangling": true`.
//! Malformed lines, lines of unknown type and records missing their fields are counted and
//! skipped. A graph already imported (the same content anywhere in the category's history)
//! adds no version.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Map, Value, json};

use super::{Sink, each_line_whole, parse_line, relative};
use memdir_api::error::{Error, Result};

/// The category the graph is imported into.
pub const CATEGORY: &str = "mcp-memory-graph";

#[derive(Default)]
struct Graph {
    /// name → (entityType, observations)
    entities: BTreeMap<String, (String, Vec<String>)>,
    relations: BTreeSet<(String, String, String)>,
}

/// Imports the graph file at `path` (or `memory.jsonl`, else `memory.json`, in it).
pub fn import(path: &Path, sink: &mut Sink<'_>) -> Result<()> {
    let file = if path.is_dir() {
        ["memory.jsonl", "memory.json"]
            .iter()
            .map(|n| path.join(n))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                Error::invalid(
                    "path",
                    format!("{} holds no memory.jsonl or memory.json", path.display()),
                )
                .detail("path", Value::from(path.display().to_string()))
            })?
    } else {
        path.to_path_buf()
    };
    let rel = relative(&file, &file);
    let mut g = Graph::default();
    each_line_whole(&file, sink, |sink, n, text| {
        let Some(v) = parse_line(text) else {
            sink.report.bad_line(&rel, n);
            return Ok(());
        };
        let s = |k: &str| v.get(k).and_then(Value::as_str);
        match s("type") {
            Some("entity") => {
                let Some(name) = s("name").filter(|n| !n.is_empty()) else {
                    sink.report.skip("entity_without_name");
                    return Ok(());
                };
                let observations: Vec<String> = v
                    .get("observations")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect();
                match g.entities.get_mut(name) {
                    Some((_, obs)) => {
                        sink.report.skip("entity_merged");
                        for o in observations {
                            if !obs.contains(&o) {
                                obs.push(o);
                            }
                        }
                    }
                    None => {
                        let mut obs: Vec<String> = Vec::new();
                        for o in observations {
                            if !obs.contains(&o) {
                                obs.push(o);
                            }
                        }
                        let ty = s("entityType").unwrap_or("").to_string();
                        g.entities.insert(name.to_string(), (ty, obs));
                    }
                }
            }
            Some("relation") => match (s("from"), s("relationType"), s("to")) {
                (Some(f), Some(r), Some(t)) => {
                    if !g.relations.insert((f.into(), r.into(), t.into())) {
                        sink.report.skip("duplicate_relation");
                    }
                }
                _ => sink.report.skip("relation_incomplete"),
            },
            Some(t) => sink.report.skip(&format!("record:{t}")),
            None => sink.report.skip("record:untyped"),
        }
        Ok(())
    })?;
    if g.entities.is_empty() && g.relations.is_empty() {
        sink.report.skip("empty_graph");
        return Ok(());
    }
    let mut entities = Map::new();
    for (name, (ty, obs)) in &g.entities {
        entities.insert(name.clone(), json!({"entityType": ty, "observations": obs}));
    }
    let mut relations: Vec<Value> = Vec::new();
    for (f, r, t) in &g.relations {
        let mut rel = json!({"from": f, "relationType": r, "to": t});
        if !g.entities.contains_key(f) || !g.entities.contains_key(t) {
            rel["dangling"] = json!(true);
            sink.report.flag("dangling_relation");
        }
        relations.push(rel);
    }
    let content = json!({"entities": entities, "relations": relations});
    sink.category(
        CATEGORY,
        &content,
        &format!("imported from the MCP memory server's {rel}"),
    )?;
    Ok(())
}
