//! The `memdir` binary: a thin shell over the library.
#![forbid(unsafe_code)]

fn main() {
    std::process::exit(memdir::cli::main());
}
