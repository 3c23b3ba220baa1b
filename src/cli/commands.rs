//! The commands of the operation table, built from its entries: the summary and description,
//! the request type's arguments, and its examples written out as command lines. A few commands
//! get something from the command line itself ([`EXTRAS`]): input from a file or stdin (ingest,
//! write, append), the query as the rest of the words (search), a question before what cannot
//! be undone (forget, compact), the export's text as it is, and the health checks' exit code.
//! A new operation needs none of it: its entry in the table is its command.

use super::*;

/// What a command prints and its exit status.
type Ran = Result<(Output, i32)>;

/// What the command line adds to one command of the table.
pub(super) struct Extra {
    /// The subcommand.
    pub command: &'static str,
    /// Arguments the command line adds (for a command the table marks `Own`, all of them).
    pub args: fn(clap::Command) -> clap::Command,
    /// Runs it, with the table's request as clap parsed it (none for an `Own` command).
    pub run: fn(&Ctx, &clap::ArgMatches, Option<Value>) -> Ran,
    /// Opens the store without recovery or adoption: the store is reported as found.
    pub as_found: bool,
}

pub(super) const EXTRAS: &[Extra] = &[
    Extra {
        command: "ingest",
        args: IngestArgs::augment_args,
        run: |m, sub, _| {
            let a = IngestArgs::from_arg_matches(sub).map_err(clap_error)?;
            let v = match &a.jsonl {
                Some(path) => ingest_jsonl(m, &a, path)?,
                None => call(m, &ingest_request(&a)?)?,
            };
            Ok((Output::Op(m.op.name, v), 0))
        },
        as_found: false,
    },
    Extra {
        command: "write",
        args: WriteArgs::augment_args,
        run: |m, sub, _| {
            let a = WriteArgs::from_arg_matches(sub).map_err(clap_error)?;
            let req = WriteRequest {
                data: a.input.value()?,
                category: a.category,
                reason: a.reason,
                expected_hash: a.expected_hash,
                merge: a.merge,
            };
            Ok((Output::Op(m.op.name, call(m, &req)?), 0))
        },
        as_found: false,
    },
    Extra {
        command: "append",
        args: AppendArgs::augment_args,
        run: |m, sub, _| {
            let a = AppendArgs::from_arg_matches(sub).map_err(clap_error)?;
            let req = AppendRequest {
                data: a.input.value()?,
                category: a.category,
                max_entries: a.max_entries,
                max_age_days: a.max_age_days,
                reason: a.reason,
            };
            Ok((Output::Op(m.op.name, call(m, &req)?), 0))
        },
        as_found: false,
    },
    Extra {
        command: "note write",
        args: NoteTextArgs::augment_args,
        run: note_text,
        as_found: false,
    },
    Extra {
        command: "note append",
        args: NoteTextArgs::augment_args,
        run: note_text,
        as_found: false,
    },
    Extra {
        command: "search",
        args: |c| {
            c.arg(
                clap::Arg::new("query")
                    .help("Words to look for, or an exact identifier, error message or path; wrap a phrase in double quotes (inside single ones for the shell) for an exact phrase; the words after search are the query, quoted or not")
                    .required(true)
                    .num_args(1..)
                    .value_name("QUERY")
                    .action(clap::ArgAction::Append),
            )
        },
        run: |m, sub, req| {
            let words: Vec<String> = sub
                .get_many::<String>("query")
                .map(|w| w.cloned().collect())
                .unwrap_or_default();
            let mut req = req.unwrap_or_default();
            req["query"] = Value::from(words.join(" "));
            Ok((Output::Op(m.op.name, call(m, &req)?), 0))
        },
        as_found: false,
    },
    Extra {
        command: "compact",
        args: |c| {
            c.arg(
                clap::Arg::new("yes")
                    .long("yes")
                    .short('y')
                    .action(clap::ArgAction::SetTrue)
                    .help("Compact every category without asking (needed without a category when stdin is not a terminal)"),
            )
        },
        run: |m, sub, req| {
            let req: api::CompactRequest = service::from_args(req.unwrap_or_default())?;
            if req.category.is_none()
                && !sub.get_flag("yes")
                && !req.dry_run
                && !confirm(
                    &format!(
                        "Trim the history of every category to its newest {} versions?",
                        req.keep_versions
                    ),
                    "compact with no category trims every category's history",
                )?
            {
                return Ok((Output::Op(m.op.name, declined("nothing was compacted")), 0));
            }
            Ok((Output::Op(m.op.name, call(m, &req)?), 0))
        },
        as_found: false,
    },
    Extra {
        command: "forget",
        args: |c| {
            c.arg(
                clap::Arg::new("yes")
                    .long("yes")
                    .action(clap::ArgAction::SetTrue)
                    .help("Forget without asking (on a terminal, forget shows what goes and asks first; otherwise it needs --yes)"),
            )
        },
        run: |m, sub, req| {
            let req: api::ForgetRequest = service::from_args(req.unwrap_or_default())?;
            Ok((
                Output::Op(m.op.name, forget(m, req, sub.get_flag("yes"))?),
                0,
            ))
        },
        as_found: false,
    },
    Extra {
        command: "export",
        args: |c| c,
        run: |m, _, req| {
            // Without --output, the export is its text, printed as it is.
            let mut v = call(m, &req.unwrap_or_default())?;
            Ok(match v.get_mut("text").map(Value::take) {
                Some(Value::String(t)) => (Output::Text(t), 0),
                _ => (Output::Op(m.op.name, v), 0),
            })
        },
        as_found: false,
    },
    Extra {
        command: "verify-store",
        args: |c| c.after_long_help("Exit status 1 when the check finds a problem."),
        run: check_store,
        as_found: true,
    },
    Extra {
        command: "doctor",
        args: |c| c.after_long_help("Exit status 1 when the check finds a problem."),
        run: check_store,
        as_found: true,
    },
];

/// `note write` and `note append`: a path and a text (inline, from a file or stdin); both
/// requests have these fields and no others.
fn note_text(m: &Ctx, sub: &clap::ArgMatches, _: Option<Value>) -> Ran {
    let a = NoteTextArgs::from_arg_matches(sub).map_err(clap_error)?;
    let req = json!({
        "text": a.text()?,
        "path": a.path,
        "expected_hash": a.expected_hash,
        "reason": a.reason,
    });
    let req: serde_json::Map<String, Value> = req
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok((Output::Op(m.op.name, call(m, &req)?), 0))
}

/// What the command line adds to the command `name`, if anything.
pub(super) fn extra(name: &str) -> Option<&'static Extra> {
    EXTRAS.iter().find(|e| e.command == name)
}

/// `verify-store` and `doctor`: the store reported exactly as found; exit 1 when the check
/// finds a problem.
fn check_store(m: &Ctx, _: &clap::ArgMatches, _: Option<Value>) -> Ran {
    let report = call(m, &api::Empty {})?;
    // A doctor's report holds the check under `checks`; verify-store's is the check.
    let checks = report.get("checks").unwrap_or(&report);
    let code = if checks["ok"] == json!(true) { 0 } else { 1 };
    Ok((Output::Op(m.op.name, report), code))
}

/// A clap error met after parsing (a request that did not come back from its matches).
pub(super) fn clap_error(e: clap::Error) -> Error {
    Error::invalid("argument", e.to_string().trim().to_string())
}

/// One subcommand per operation of the table that has a command, in the table's order. A
/// command named in two words (`note read`) is a subcommand of a group (`note`), which comes
/// where its first member would.
pub(super) fn table_commands() -> Vec<clap::Command> {
    let mut out: Vec<clap::Command> = Vec::new();
    for (group, cmd) in commands_of_table() {
        match group {
            None => out.push(cmd),
            Some(g) => match out.iter().position(|c| c.get_name() == g) {
                Some(i) => {
                    let parent = std::mem::replace(&mut out[i], clap::Command::new(g));
                    out[i] = parent.subcommand(cmd);
                }
                None => out.push(
                    clap::Command::new(g)
                        .about(GROUPS.iter().find(|(n, _)| *n == g).map_or("", |(_, a)| *a))
                        .subcommand_required(true)
                        .arg_required_else_help(true)
                        .subcommand(cmd),
                ),
            },
        }
    }
    // A group's examples: the first of each of its commands.
    out.into_iter()
        .map(|c| {
            if !GROUPS.iter().any(|(g, _)| *g == c.get_name()) {
                return c;
            }
            let firsts: Vec<String> = c
                .get_subcommands()
                .filter_map(|s| {
                    let h = s.get_after_help()?.to_string();
                    h.lines().nth(1).map(|l| l.trim().to_string())
                })
                .collect();
            c.after_help(format!("Examples:\n  {}", firsts.join("\n  ")))
        })
        .collect()
}

/// The command typed as `name` (`search`, `note read`) under `root`.
pub(super) fn find_command<'a>(root: &'a clap::Command, name: &str) -> Option<&'a clap::Command> {
    name.split(' ')
        .try_fold(root, |c, word| c.find_subcommand(word))
}

/// The groups of two-word commands, and what each holds.
const GROUPS: &[(&str, &str)] = &[
    (
        "note",
        "Notes: the Markdown files under notes/, versioned and searched.",
    ),
    (
        "notes",
        "All the notes at once: export them as plain files.",
    ),
];

/// Each command of the table, with the group it belongs to (`note` for `note read`).
fn commands_of_table() -> Vec<(Option<&'static str>, clap::Command)> {
    ops::table()
        .iter()
        .filter_map(|op| op.cli.map(|c| (op, c)))
        .map(|(op, c)| {
            let (group, own) = match c.name.split_once(' ') {
                Some((g, n)) => (Some(g), n),
                None => (None, c.name),
            };
            let mut cmd = clap::Command::new(own);
            if let Some(a) = c.args {
                cmd = (a.augment)(cmd);
            }
            if let Some(e) = extra(c.name) {
                cmd = (e.args)(cmd);
            }
            // After the arguments: a request type's doc comment would be clap's about.
            let cmd = cmd
                .about(format!("{}.", op.summary.trim_end_matches('.')))
                .long_about(op.description);
            // An example whose request the command line cannot say (a batch of chunks, which
            // it takes as --jsonl) is left out.
            let lines: Vec<String> = (op.examples)()
                .iter()
                .filter(|(_, args)| sayable(&cmd, args))
                .map(|(_, args)| example_line_as(c.name, &cmd, args))
                .collect();
            (
                group,
                cmd.after_help(format!("Examples:\n  {}", lines.join("\n  "))),
            )
        })
        .collect()
}

/// Whether every field of the request `args` is an argument of `cmd`.
fn sayable(cmd: &clap::Command, args: &Value) -> bool {
    args.as_object().is_some_and(|o| {
        o.keys()
            .all(|k| cmd.get_arguments().any(|a| a.get_id().as_str() == k))
    })
}

/// An example request of the table as the command line that makes it.
#[cfg(test)]
pub(super) fn example_line(cmd: &clap::Command, args: &Value) -> String {
    example_line_as(cmd.get_name(), cmd, args)
}

/// [`example_line`] for the command typed as `name` (`note read`).
fn example_line_as(name: &str, cmd: &clap::Command, args: &Value) -> String {
    let mut words = vec!["memdir".to_string()];
    words.extend(name.split(' ').map(str::to_string));
    let empty = serde_json::Map::new();
    let fields = args.as_object().unwrap_or(&empty);
    let scalar = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    for a in cmd.get_positionals() {
        match fields.get(a.get_id().as_str()) {
            Some(Value::Array(items)) => words.extend(items.iter().map(scalar)),
            Some(v) => words.push(scalar(v)),
            None => {}
        }
    }
    for a in cmd.get_arguments().filter(|a| !a.is_positional()) {
        let (Some(long), Some(v)) = (a.get_long(), fields.get(a.get_id().as_str())) else {
            continue;
        };
        match v {
            Value::Bool(true) => words.push(format!("--{long}")),
            Value::Bool(false) | Value::Null => {}
            Value::Array(items) if matches!(a.get_action(), clap::ArgAction::Append) => {
                for i in items {
                    words.extend([format!("--{long}"), scalar(i)]);
                }
            }
            Value::Array(items) => {
                let joined: Vec<String> = items.iter().map(scalar).collect();
                words.extend([format!("--{long}"), joined.join(",")]);
            }
            v => words.extend([format!("--{long}"), scalar(v)]),
        }
    }
    words
        .iter()
        .map(|w| shell_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `w` as one word for a POSIX shell: as it is when it is plain, else in single quotes.
fn shell_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_extra_names_a_command_of_the_table() {
        let names: Vec<&str> = ops::table()
            .iter()
            .filter_map(|o| o.cli.map(|c| c.name))
            .collect();
        for e in EXTRAS {
            assert!(
                names.contains(&e.command),
                "{} is no command of the table",
                e.command
            );
        }
        // A command whose arguments the binary gives has them here.
        for op in ops::table() {
            if let Some(c) = op.cli.filter(|c| c.args.is_none()) {
                assert!(extra(c.name).is_some(), "{} has no arguments", c.name);
            }
        }
    }

    #[test]
    fn examples_become_command_lines_a_shell_reads_back() {
        let root = super::super::args::command();
        let search = root.find_subcommand("search").unwrap();
        assert_eq!(
            example_line(search, &json!({"query": "pool timeout", "limit": 5})),
            "memdir search 'pool timeout' --limit 5"
        );
        let write = root.find_subcommand("write").unwrap();
        assert_eq!(
            example_line(
                write,
                &json!({"category": "base", "data": {"a": "it's"}, "merge": true})
            ),
            r#"memdir write base --data '{"a":"it'\''s"}' --merge"#
        );
        let context = root.find_subcommand("context").unwrap();
        assert_eq!(
            example_line(context, &json!({"categories": ["base", "projects"]})),
            "memdir context base projects"
        );
        // Every example of a command whose arguments are its request's can be said on the
        // command line, and every command has one.
        for op in ops::table() {
            let Some(c) = op.cli else { continue };
            let cmd = find_command(&root, c.name).unwrap();
            let examples = (op.examples)();
            for (name, args) in &examples {
                assert!(
                    c.args.is_none() || sayable(cmd, args),
                    "{}: example {name} names a field with no argument",
                    c.name
                );
            }
            assert!(
                examples.iter().any(|(_, a)| sayable(cmd, a)),
                "{}: no example",
                c.name
            );
        }
    }
}
