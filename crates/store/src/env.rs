//! The process environment: the one module of memdir that reads it.
//!
//! Everything else takes an [`Env`], a function from a variable's name to its value, so tests
//! and the config resolver can hand in an environment of their own. Architecture Invariant:
//! `std::env::var` appears in no other file (the tidy test checks it).

use std::path::{Path, PathBuf};

/// The environment as memdir sees it: a variable's value, `None` when unset or empty.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment (an empty value counts as unset).
pub fn process(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The process environment, an empty value included (`MEMDIR_FAILPOINT=` is a value).
pub fn process_raw(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn var(env: Env, name: &str) -> Option<String> {
    env(name).filter(|v| !v.is_empty())
}

/// The XDG data directory under which tools keep their data: `$XDG_DATA_HOME` when absolute,
/// else `~/.local/share` (the importers look for other tools' data there).
pub fn data_home(env: Env) -> Option<PathBuf> {
    match var(env, "XDG_DATA_HOME").filter(|x| Path::new(x).is_absolute()) {
        Some(x) => Some(PathBuf::from(x)),
        None => var(env, "HOME").map(|h| PathBuf::from(h).join(".local/share")),
    }
}

/// The XDG config directory under which tools keep their settings: `$XDG_CONFIG_HOME` when
/// absolute, else `~/.config`.
pub fn config_home(env: Env) -> Option<PathBuf> {
    match var(env, "XDG_CONFIG_HOME").filter(|x| Path::new(x).is_absolute()) {
        Some(x) => Some(PathBuf::from(x)),
        None => var(env, "HOME").map(|h| PathBuf::from(h).join(".config")),
    }
}
