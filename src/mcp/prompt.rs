//! Prompts: short messages that start the model on a memory task (clients offer them as slash
//! commands). Each names the default profile's tools and asks for no more than the task needs.

use rmcp::model::{GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage, Role};
use serde_json::Value;

use memdir_api::error::Error;

/// A prompt's argument by name ("" when it was not given).
type Arg<'a> = &'a dyn Fn(&str) -> String;

/// One prompt: its name, title, description and arguments `(name, description, required)`.
struct Def {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    args: &'static [(&'static str, &'static str, bool)],
    /// The message, from the arguments (a missing optional one is "").
    text: fn(Arg<'_>) -> String,
}

const DEFS: &[Def] = &[
    Def {
        name: "recall",
        title: "Recall before starting",
        description: "Search memory and read the relevant categories before starting on a topic.",
        args: &[
            ("topic", "What you are about to work on.", true),
            ("project", "The project, to narrow the search.", false),
        ],
        text: |a| {
            let project = match a("project").as_str() {
                "" => String::new(),
                p => format!(" in project {p}"),
            };
            format!(
                "Before starting on {topic}{project}, recall what memory holds:\n\
                 1. memory_list, then memory_read the categories that bear on it.\n\
                 2. memory_search {{\"query\": {q}{pq}}}; memory_fetch around the best hits.\n\
                 3. Sum up in a few lines the decisions, preferences and open questions you found, \
                 citing sessions or categories, then begin. Do not ask for what memory answers.",
                topic = a("topic"),
                q = Value::from(a("topic")),
                pq = match a("project").as_str() {
                    "" => String::new(),
                    p => format!(", \"project\": {}", Value::from(p)),
                },
            )
        },
    },
    Def {
        name: "remember",
        title: "Remember this session",
        description: "Save this session's decisions to memory: chunks and category updates.",
        args: &[(
            "summary",
            "What to remember, if not the whole session.",
            false,
        )],
        text: |a| {
            let focus = match a("summary").as_str() {
                "" => String::new(),
                s => format!("\nFocus on: {s}"),
            };
            format!(
                "Save what this session decided to memory:\n\
                 1. memory_ingest each decision, fact learned and open question as its own chunk \
                 (one call with chunks: [...], this session's id, its project).\n\
                 2. For lasting facts (preferences, project settings), memory_read the category, \
                 then memory_write {{\"merge\": true, \"expected_hash\": ...}} only the changed keys.\n\
                 3. Say in one line what you saved where.{focus}"
            )
        },
    },
    Def {
        name: "resume",
        title: "Resume where you left off",
        description: "Read the newest session (of a project) and continue from where it ended.",
        args: &[("project", "The project to resume.", false)],
        text: |a| {
            let filter = match a("project").as_str() {
                "" => String::new(),
                p => format!(", \"project\": {}", Value::from(p)),
            };
            format!(
                "Resume the last session: memory_overview {{\"days\": 30{filter}}}, then \
                 memory_fetch the newest session's last page (from total minus 20). Say in a few \
                 lines where it stopped and what was next, and continue from there."
            )
        },
    },
    Def {
        name: "curate",
        title: "Tidy the categories",
        description: "Review categories for stale, duplicated or contradictory facts and fix them.",
        args: &[],
        text: |_| {
            "Review curated memory: memory_list, memory_read each category, and list facts that \
             are stale, duplicated or contradict each other or recent sessions (memory_search). \
             Propose the changes; once the user agrees, apply each with memory_write \
             {\"merge\": true, \"expected_hash\": ...}."
                .to_string()
        },
    },
];

/// Every prompt.
pub fn list() -> Vec<Prompt> {
    DEFS.iter()
        .map(|d| {
            let args = d
                .args
                .iter()
                .map(|(n, desc, req)| {
                    PromptArgument::new(*n)
                        .with_description(*desc)
                        .with_required(*req)
                })
                .collect::<Vec<_>>();
            Prompt::new(
                d.name,
                Some(d.description),
                Some(args).filter(|a| !a.is_empty()),
            )
            .with_title(d.title)
        })
        .collect()
}

/// The prompt named `name`, or the error that names the prompts there are.
fn find(name: &str) -> Result<&'static Def, Error> {
    DEFS.iter().find(|d| d.name == name).ok_or_else(|| {
        let names: Vec<_> = DEFS.iter().map(|d| d.name).collect();
        Error::invalid(
            "name",
            format!("no prompt is named {name:?}; the prompts are {names:?}"),
        )
    })
}

/// Whether prompt `name` exists (an error naming the prompts if not).
pub fn check(name: &str) -> Result<(), Error> {
    find(name).map(|_| ())
}

/// The message of prompt `name` with its arguments.
pub fn get(name: &str, args: Option<&JsonObject>) -> Result<GetPromptResult, Error> {
    let d = find(name)?;
    let arg = |n: &str| -> String {
        match args.and_then(|a| a.get(n)) {
            Some(Value::String(s)) => s.trim().to_string(),
            Some(Value::Null) | None => String::new(),
            Some(v) => v.to_string(),
        }
    };
    for (n, _, required) in d.args {
        if *required && arg(n).is_empty() {
            return Err(Error::invalid(
                n,
                format!("prompt {name} needs the argument {n}"),
            ));
        }
    }
    if let Some(unknown) = args.and_then(|a| a.keys().find(|k| !d.args.iter().any(|x| x.0 == *k))) {
        return Err(Error::invalid(
            unknown,
            format!("prompt {name} has no argument {unknown:?}"),
        ));
    }
    let text = (d.text)(&arg);
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(d.description),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(name: &str, args: Value) -> String {
        let args = args.as_object().cloned();
        let r = get(name, args.as_ref()).expect("prompt");
        let v = serde_json::to_value(&r.messages[0]).unwrap();
        v["content"]["text"].as_str().unwrap().to_string()
    }

    #[test]
    fn every_prompt_is_short_and_names_only_default_tools() {
        let tools: Vec<String> = crate::mcp::tools(crate::mcp::Profile::Default)
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        for d in DEFS {
            let args: serde_json::Map<_, _> = d
                .args
                .iter()
                .map(|a| (a.0.to_string(), json!("x")))
                .collect();
            let t = text(d.name, Value::Object(args));
            assert!(t.len() < 600, "{}: {} chars", d.name, t.len());
            for word in t.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("memory_") {
                    assert!(tools.iter().any(|n| n == word), "{}: {word}", d.name);
                }
            }
        }
    }

    #[test]
    fn arguments_land_in_the_text_quoted_where_they_are_json() {
        let t = text(
            "recall",
            json!({"topic": "the \"pool\" timeout", "project": "web"}),
        );
        assert!(
            t.contains(r#"memory_search {"query": "the \"pool\" timeout", "project": "web"}"#),
            "{t}"
        );
        assert!(
            text("remember", json!({"summary": "the editor"})).ends_with("Focus on: the editor")
        );
        assert!(!text("remember", json!({})).contains("Focus"));
        assert!(text("resume", json!({"project": "web"})).contains(r#""project": "web""#));
    }

    #[test]
    fn missing_required_and_unknown_arguments_are_refused() {
        assert_eq!(get("recall", None).unwrap_err().details["field"], "topic");
        let a = json!({"topic": "x", "nope": 1});
        assert_eq!(
            get("recall", a.as_object()).unwrap_err().details["field"],
            "nope"
        );
        assert!(get("nope", None).is_err());
    }
}
