//! The command line's view of a request: how a table entry's CLI command gets its arguments.
//!
//! The request types derive clap's `Args` (their doc comments are the help, their defaults the
//! one default), so the operation table can hand the binary, for each command, the request's
//! arguments and their parse ([`derived`]) and the binary builds its subcommands from the table
//! with no list of its own. A command whose input is more than flags (text from a file or
//! stdin, a JSON document) is [`own`]: the binary gives it its arguments and builds the request.

use serde::Serialize;
use serde_json::Value;

/// A table entry's CLI command.
#[derive(Clone, Copy, Debug)]
pub struct Command {
    /// The subcommand's name (`restore-snapshot`).
    pub name: &'static str,
    /// The request's own arguments; `None` when the binary gives the command its arguments.
    pub args: Option<RequestArgs>,
}

/// A request type's command-line arguments: what clap adds to a command, and the request
/// (as JSON, the table's input) parsed back from what clap matched.
#[derive(Clone, Copy, Debug)]
pub struct RequestArgs {
    pub augment: fn(clap::Command) -> clap::Command,
    pub parse: fn(&clap::ArgMatches) -> Result<Value, clap::Error>,
}

/// A command whose arguments are the request's fields, as the request type declares them.
pub fn derived<T>(name: &'static str) -> Command
where
    T: clap::Args + clap::FromArgMatches + Serialize,
{
    Command {
        name,
        args: Some(RequestArgs {
            augment: T::augment_args,
            parse: parse::<T>,
        }),
    }
}

/// A command whose arguments the binary gives (the request is built from them there).
pub fn own(name: &'static str) -> Command {
    Command { name, args: None }
}

fn parse<T: clap::FromArgMatches + Serialize>(m: &clap::ArgMatches) -> Result<Value, clap::Error> {
    let req = T::from_arg_matches(m)?;
    serde_json::to_value(req).map_err(|e| {
        clap::Error::raw(
            clap::error::ErrorKind::ValueValidation,
            format!("the request did not serialize: {e}"),
        )
    })
}
