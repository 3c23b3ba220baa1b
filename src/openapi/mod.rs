//! `schema/openapi.json`, generated from the operation table (`memdir openapi`).
//!
//! The surface's own parts (info, security, error responses, `/health`, `/tools`) come from
//! `base.json`; every other path, its request and response schemas (from the `api` types),
//! examples and error statuses come from [`memdir_engine::ops`]. A test fails when the committed file
//! differs from this output.

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use memdir_engine::ops::{self, Method, Op};

const BASE: &str = include_str!("base.json");

/// The component response of an error status.
fn error_response(status: u16) -> Option<&'static str> {
    Some(match status {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        408 => "RequestTimeout",
        409 => "Conflict",
        413 => "PayloadTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Corrupt",
        500 => "InternalError",
        503 => "Unavailable",
        _ => return None,
    })
}

fn responses(op: &Op, method: Method, errors: &[u16], ok: Value) -> Value {
    let mut r = Map::new();
    r.insert(
        "200".into(),
        json!({"description": op.summary, "content": {"application/json": {"schema": ok}}}),
    );
    let mut codes: Vec<u16> = errors.to_vec();
    codes.extend([401, 403]);
    if method == Method::Post {
        // Every body must be JSON and arrive in time (the guard's).
        codes.extend([408, 415]);
    }
    codes.sort();
    codes.dedup();
    for c in codes {
        if let Some(name) = error_response(c) {
            r.insert(
                c.to_string(),
                json!({"$ref": format!("#/components/responses/{name}")}),
            );
        }
    }
    Value::Object(r)
}

/// The OpenAPI document of the REST API.
pub fn document() -> Value {
    let mut doc: Value = serde_json::from_str(BASE).expect("invariant: base.json is JSON");
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    let mut g = SchemaGenerator::new(settings);
    let mut paths = Map::new();
    for op in ops::table() {
        let Some(route) = op.rest else { continue };
        let request = (op.request)(&mut g).to_value();
        let response = (op.response)(&mut g).to_value();
        let mut o = Map::new();
        o.insert("operationId".into(), json!(route.operation_id));
        o.insert("summary".into(), json!(op.summary));
        o.insert("tags".into(), json!(route.tags));
        o.insert("description".into(), json!(op.description));
        o.insert("x-memdir-operation".into(), json!(op.name));
        if let Some(t) = op.mcp {
            o.insert("x-memdir-tool".into(), json!(t.name));
        }
        let examples = (op.examples)();
        match route.method {
            Method::Get => {
                let params = query_parameters(op, &examples);
                if !params.is_empty() {
                    o.insert("parameters".into(), Value::Array(params));
                    o.insert(
                        "description".into(),
                        json!(format!(
                            "{} Query parameters only; any other parameter is rejected with 400.",
                            op.description
                        )),
                    );
                }
            }
            Method::Post => {
                o.insert(
                    "requestBody".into(),
                    request_body(&mut g, route.path, request, examples),
                );
            }
        }
        o.insert(
            "responses".into(),
            responses(op, route.method, route.errors, response),
        );
        let method = match route.method {
            Method::Get => "get",
            Method::Post => "post",
        };
        paths.insert(route.path.to_string(), json!({ method: Value::Object(o) }));
    }
    let defs = g.take_definitions(true);
    let base_paths = doc["paths"].as_object().cloned().unwrap_or_default();
    let mut all = Map::new();
    // The surface's own paths first, then the table's, in table order.
    for (k, v) in base_paths.into_iter().chain(paths) {
        all.insert(k, v);
    }
    doc["paths"] = Value::Object(all);
    if let Some(schemas) = doc["components"]["schemas"].as_object_mut() {
        for (k, v) in defs {
            schemas.insert(k, v);
        }
    }
    doc["info"]["version"] = json!(env!("CARGO_PKG_VERSION"));
    doc
}

/// The query parameters of a GET operation, one per input property, each with its
/// description and the value of the first example.
fn query_parameters(op: &Op, examples: &[(&'static str, Value)]) -> Vec<Value> {
    let schema = Value::Object(ops::input_schema(op));
    let required: Vec<Value> = schema
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let example = examples
        .first()
        .map(|(_, v)| v.clone())
        .unwrap_or(json!({}));
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, s)| {
                    let mut s = s.clone();
                    let description = s
                        .as_object_mut()
                        .and_then(|m| m.remove("description"))
                        .unwrap_or(json!(""));
                    let mut p = json!({
                        "name": name, "in": "query",
                        "required": required.contains(&json!(name)),
                        "description": description, "schema": s,
                    });
                    if let Some(x) = example.get(name) {
                        p["example"] = x.clone();
                    }
                    p
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The JSON request body of a POST operation at `path`: its schema and its examples (one as
/// `example`, several as `examples`).
fn request_body(
    g: &mut SchemaGenerator,
    path: &str,
    request: Value,
    examples: Vec<(&'static str, Value)>,
) -> Value {
    let (schema, examples) = if path == "/search" {
        search_body(g, request, examples)
    } else {
        (request, examples)
    };
    let mut media = Map::new();
    media.insert("schema".into(), schema);
    if examples.len() == 1 {
        media.insert("example".into(), examples[0].1.clone());
    } else {
        media.insert(
            "examples".into(),
            Value::Object(
                examples
                    .into_iter()
                    .map(|(n, v)| (n.to_string(), json!({ "value": v })))
                    .collect(),
            ),
        );
    }
    json!({"required": true, "content": {"application/json": Value::Object(media)}})
}

/// `POST /search` takes the search request, or with `"semantic": true` the semantic one.
fn search_body(
    g: &mut SchemaGenerator,
    keyword: Value,
    mut examples: Vec<(&'static str, Value)>,
) -> (Value, Vec<(&'static str, Value)>) {
    let Some(sem) = ops::find("search_semantic") else {
        return (keyword, examples);
    };
    let mut variant = Value::Object(ops::input_schema(sem));
    variant["properties"]["semantic"] =
        json!({"const": true, "description": "Run semantic search: query and limit only."});
    if let Some(req) = variant["required"].as_array_mut() {
        req.push(json!("semantic"));
    } else {
        variant["required"] = json!(["query", "semantic"]);
    }
    variant["description"] = json!(sem.description);
    if let Some(t) = sem.mcp {
        variant["x-memdir-tool"] = json!(t.name);
    }
    let _ = g;
    for (name, mut ex) in (sem.examples)() {
        ex["semantic"] = json!(true);
        examples.push((if name == "example" { "semantic" } else { name }, ex));
    }
    (json!({"oneOf": [keyword, variant]}), examples)
}
