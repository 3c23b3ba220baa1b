//! The name encoder (`model::encode_component`, `decode_component`) behind `CategoryName`
//! and `SessionId`: every accepted name round trips, becomes one safe path component, and
//! never shares a file name with another accepted name, even on a case-insensitive file
//! system.

use memdir_store::model::{
    CategoryName, MAX_CATEGORY_NAME_CHARS, MAX_ENCODED_BYTES, MAX_SESSION_ID_CHARS, SessionId,
    decode_component, encode_component,
};
use proptest::prelude::*;

use crate::arb;

/// Stems Windows reserves as device names, whatever the case or extension.
fn windows_reserved(component: &str) -> bool {
    let stem = component
        .split('.')
        .next()
        .unwrap_or("")
        .trim_end_matches([' ', '.'])
        .to_ascii_lowercase();
    let device = |p: &str| {
        stem.strip_prefix(p)
            .is_some_and(|d| d.len() == 1 && d.as_bytes()[0].is_ascii_digit())
    };
    matches!(
        stem.as_str(),
        "con" | "prn" | "aux" | "nul" | "conin$" | "conout$" | "clock$"
    ) || device("com")
        || device("lpt")
}

/// Checks that `component` is one portable path component.
fn check_component(name: &str, component: &str) -> Result<(), TestCaseError> {
    prop_assert!(!component.is_empty(), "{:?}", name);
    prop_assert!(component.is_ascii(), "{:?} -> {:?}", name, component);
    prop_assert!(
        !component.contains(['/', '\\', '\0', ':', '*', '?', '"', '<', '>', '|']),
        "{:?} -> {:?}",
        name,
        component
    );
    prop_assert!(
        !component.chars().any(|c| c.is_control()),
        "{:?} -> {:?}",
        name,
        component
    );
    prop_assert!(component != "." && component != "..");
    // Windows drops a trailing dot or space; a leading dot hides the file.
    prop_assert!(
        !component.ends_with(['.', ' ']) && !component.starts_with('.'),
        "{:?}",
        component
    );
    prop_assert!(
        !windows_reserved(component),
        "{:?} -> {:?}",
        name,
        component
    );
    prop_assert!(
        component.len() <= MAX_ENCODED_BYTES,
        "{} bytes",
        component.len()
    );
    Ok(())
}

/// Name-like text: plain names, reserved stems, dots, case, non-ASCII, near the limits.
fn name_like() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        3 => "[a-z0-9._-]{1,8}",
        2 => "[A-Za-z0-9 .~-]{1,8}",
        1 => prop::sample::select(&["con", "CON", "Nul", "com1", "LPT9", "aux", "prn", "conin$", "clock$", ".", "..", "~41", "~"][..]).prop_map(str::to_string),
        1 => arb::text(4),
        1 => "[\\PC]{1,4}",
    ];
    prop_oneof![
        6 => prop::collection::vec(part, 1..5).prop_map(|v| v.concat()),
        1 => ("[a-zA-Z]", 60usize..260).prop_map(|(c, n)| c.repeat(n)),
        1 => ("[éß😀]", 30usize..90).prop_map(|(c, n)| c.repeat(n)),
    ]
}

/// A case variant of `name`: some characters' case swapped (Unicode rules included).
fn case_variant(name: &str, mask: u64) -> String {
    name.chars()
        .enumerate()
        .flat_map(|(i, c)| {
            let swap = mask >> (i % 64) & 1 == 1;
            let s: String = if !swap {
                c.to_string()
            } else if c.is_uppercase() {
                c.to_lowercase().collect()
            } else {
                c.to_uppercase().collect()
            };
            s.chars().collect::<Vec<_>>()
        })
        .collect()
}

/// The accepted names a string is, as a category name, a session id, or both.
fn accepted(name: &str) -> (bool, bool) {
    (
        CategoryName::new(name).is_ok(),
        SessionId::new(name).is_ok(),
    )
}

proptest! {
    #![proptest_config(crate::config(2000))]

    /// Every accepted name decodes back from its file name, which is one safe component.
    #[test]
    fn accepted_names_round_trip_to_one_safe_component(name in name_like()) {
        let (category, session) = accepted(&name);
        let chars = name.chars().count();
        if category {
            prop_assert!(chars <= MAX_CATEGORY_NAME_CHARS);
            let c = CategoryName::new(&name).unwrap();
            prop_assert_eq!(c.as_str(), name.as_str());
            prop_assert_eq!(c.file_stem(), encode_component(&name));
        }
        if session {
            prop_assert!(chars <= MAX_SESSION_ID_CHARS);
            prop_assert_eq!(SessionId::new(&name).unwrap().dir_name(), encode_component(&name));
        }
        // A category is a session id that also avoids `/`, `\`, `.` and `..`.
        prop_assert!(!category || session);
        if category || session {
            let e = encode_component(&name);
            check_component(&name, &e)?;
            prop_assert_eq!(decode_component(&e), Some(name.clone()));
        }
    }

    /// Two distinct accepted names never share a file name, even compared without case.
    #[test]
    fn distinct_names_never_share_a_file(a in name_like(), b in name_like(), mask in any::<u64>()) {
        let variant = case_variant(&a, mask);
        for other in [b, variant] {
            let ok = |n: &str| { let (c, s) = accepted(n); c || s };
            if a == other || !ok(&a) || !ok(&other) {
                continue;
            }
            let (ea, eb) = (encode_component(&a), encode_component(&other));
            prop_assert_ne!(&ea, &eb);
            prop_assert_ne!(
                ea.to_ascii_lowercase(),
                eb.to_ascii_lowercase(),
                "{:?} and {:?} share a file on a case-insensitive file system", a, other
            );
        }
    }

    /// `decode_component` never panics and accepts only canonical encodings.
    #[test]
    fn decoding_accepts_only_canonical_components(
        s in prop_oneof![
            arb::text(12),
            "(~[0-9A-Fa-f]{0,2}|[a-z.~_-]){0,8}",
            name_like().prop_map(|n| encode_component(&n)),
        ]
    ) {
        if let Some(name) = decode_component(&s) {
            prop_assert_eq!(encode_component(&name), s);
        }
    }

    /// Validation never panics on any text.
    #[test]
    fn validation_never_panics(s in arb::text(40)) {
        let _ = accepted(&s);
        let _ = memdir_store::model::validate_project(&s);
    }
}

/// Names that differ only in case, or that Windows would treat as one device, get distinct
/// and safe file names.
#[test]
fn case_twins_and_devices_get_distinct_files() {
    let names = [
        "base", "Base", "BASE", "con", "Con", "CON", "con.json", "com1", "COM1", "lpt0",
    ];
    let mut seen = std::collections::BTreeSet::new();
    for n in names {
        let e = encode_component(n);
        assert!(seen.insert(e.to_ascii_lowercase()), "{n} -> {e} collides");
        assert!(!windows_reserved(&e), "{n} -> {e}");
        assert_eq!(decode_component(&e).as_deref(), Some(n));
    }
}
