//! The `memdir` binary: a thin shell over the library.
#![forbid(unsafe_code)]

use clap::Parser;

fn main() {
    let cli = memdir::cli::Cli::parse();
    let code = match memdir::cli::run(cli) {
        Ok((out, code)) => {
            match out {
                memdir::cli::Output::Json(v) => {
                    println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default())
                }
                memdir::cli::Output::Text(t) => print!("{t}"),
                memdir::cli::Output::Nothing => {}
            }
            code
        }
        Err(e) => memdir::cli::report_error(&e),
    };
    std::process::exit(code);
}
