//! The `memdir` binary: a thin shell over the library.
#![forbid(unsafe_code)]

use clap::Parser;

fn main() {
    let cli = memdir::cli::Cli::parse();
    let code = match memdir::cli::run(cli) {
        Ok((out, code)) => {
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
            code
        }
        Err(e) => memdir::cli::report_error(&e),
    };
    std::process::exit(code);
}
