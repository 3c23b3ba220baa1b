//! The `memdir` binary: a thin shell over the library.
#![forbid(unsafe_code)]

use std::io::Write;

fn main() {
    let cli = match memdir::cli::parse() {
        Ok(cli) => cli,
        Err(code) => std::process::exit(code),
    };
    let code = match memdir::cli::run(cli) {
        Ok((out, code)) => {
            let text = match out {
                memdir::cli::Output::Json(v) => {
                    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
                }
                memdir::cli::Output::Text(t) => t,
                memdir::cli::Output::Nothing => String::new(),
            };
            // A reader that went away (`| head`) is not an error worth a panic.
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
            code
        }
        Err(e) => memdir::cli::report_error(&e),
    };
    std::process::exit(code);
}
