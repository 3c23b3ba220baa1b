//! What a command prints: JSON for programs, text for people (chosen once per run), and
//! errors with the exit code of their kind.

use super::*;

/// How results and errors are printed: chosen once from `--format`, `--json`, `--color`,
/// `NO_COLOR` and whether the streams are terminals.
#[derive(Clone, Copy, Debug)]
pub struct Printing {
    /// Results for people (else JSON).
    pub human: bool,
    /// Errors for people (else JSON on stderr).
    pub human_errors: bool,
    pub color_out: bool,
    pub color_err: bool,
}

impl Printing {
    /// The choice for `cli` in this process's environment.
    pub fn of(cli: &Cli) -> Printing {
        Printing::decide(
            if cli.json {
                "json"
            } else if cli.human {
                "human"
            } else {
                "auto"
            },
            &cli.color,
            std::io::stdout().is_terminal(),
            std::io::stderr().is_terminal(),
            config::process_env("NO_COLOR").is_some(),
            config::process_env("TERM").as_deref() == Some("dumb"),
        )
    }

    /// The choice for a format, a colour setting and the streams' kinds.
    pub fn decide(
        format: &str,
        color: &str,
        out_tty: bool,
        err_tty: bool,
        no_color: bool,
        dumb: bool,
    ) -> Printing {
        let human = format == "human" || (format == "auto" && out_tty);
        let human_errors = format == "human" || (format == "auto" && err_tty);
        let colour = |tty: bool| match color {
            "always" => true,
            "never" => false,
            _ => tty && !no_color && !dumb,
        };
        Printing {
            human,
            human_errors,
            color_out: human && colour(out_tty),
            color_err: human_errors && colour(err_tty),
        }
    }
}

/// What a command prints on stdout.
pub enum Output {
    Json(Value),
    /// The result of an operation of the table (by name): JSON, or text for people.
    Op(&'static str, Value),
    Text(String),
    Nothing,
}

impl Output {
    /// The text to print on stdout.
    pub fn text(self, p: Printing) -> String {
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
        match self {
            Output::Op(op, v) if p.human => {
                crate::human::render(op, &v, crate::human::Style { color: p.color_out })
            }
            Output::Op(_, v) | Output::Json(v) => pretty(&v),
            Output::Text(t) => t,
            Output::Nothing => String::new(),
        }
    }
}

/// Prints an error on stderr (JSON, or one line and its hints for people) and returns its
/// exit code.
pub fn report_error(e: &Error, p: Printing) -> i32 {
    let e = &memdir_engine::ops::for_surface(e.clone(), memdir_engine::ops::Surface::Cli);
    if p.human_errors {
        let notices: Vec<String> = e
            .details
            .get("notices")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|n| n.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let mut hints = e.hints.clone();
        hints.extend(notices.into_iter().map(|n| format!("repaired: {n}")));
        eprint!(
            "{}",
            crate::human::error(
                e.kind.code(),
                &e.message,
                &hints,
                crate::human::Style { color: p.color_err }
            )
        );
    } else {
        eprintln!(
            "{}",
            serde_json::to_string_pretty(&json!({"error": e.to_json()}))
                .unwrap_or_else(|_| e.message.clone())
        );
    }
    e.kind.exit_code()
}
