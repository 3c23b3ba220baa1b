//! Redaction: what must never reach the files or the index.
//!
//! Every text memdir is about to store passes through a [`Redactor`] first: chunk content and
//! metadata on ingest, and the string values and reason of a category write or log append.
//! Two things happen, in this order:
//!
//! 1. `<private>…</private>` spans are dropped whole (tags included, case-insensitive, with
//!    whitespace or attributes allowed inside a tag: `<private >`, `< / private>`,
//!    `<private reason="x">`). Spans nest: a span ends at the closing tag that matches its
//!    opening tag, not at an inner span's. An opening tag without its closing tag drops
//!    everything after it: text the user marked private is never kept by accident.
//! 2. Well-known secrets become `[REDACTED:<kind>]`: cloud access keys, GitHub, GitLab and
//!    Slack tokens, OpenAI- and Anthropic-style API keys, private key blocks, JWTs, passwords
//!    in URLs and `password=`/`secret=` assignments, plus the patterns of the config file
//!    (`[redaction]`). A candidate that an allow pattern matches is kept as it is.
//!
//! JSON values ([`Redactor::value`]) are redacted in their object keys as well as their
//! string values: a key is text like any other.
//!
//! The caller learns how many spans of each kind went ([`Counts`]), never what they were.
//!
//! Cost: text without any trigger (`AKIA`, `ghp_`, `sk-`, `eyJ`, `://`, `=`, `BEGIN`, ...)
//! costs one scan per pattern set; the figures are in bench/README.md. False positives are
//! kept rare by anchoring every built-in pattern to a literal prefix or a key name, and by
//! leaving alone assignments whose value is a plain identifier (`password=password`) or a
//! placeholder (`${PASS}`, `<password>`).
//!
//! This module is pure: it knows regular expressions and JSON values, nothing of files.

use std::borrow::Cow;
use std::collections::BTreeMap;

use std::sync::OnceLock;

use aho_corasick::AhoCorasick;
use regex::{Regex, RegexBuilder};
use serde_json::Value;

/// Spans redacted, by kind (`private`, `aws_access_key`, ...).
pub type Counts = BTreeMap<String, u64>;

/// One secret pattern. When it has a capture group named `s`, only that group is replaced
/// (the key of an assignment stays readable); otherwise the whole match is.
#[derive(Debug)]
struct Rule {
    kind: String,
    pattern: String,
    /// Compiled on the first text the set says this rule may match.
    re: OnceLock<Regex>,
    /// A candidate must hold a digit (keys and tokens do; prose and identifiers mostly do
    /// not).
    needs_digit: bool,
    /// An assignment's value: a plain identifier or a placeholder is left alone.
    value_check: bool,
}

/// The built-in patterns: (kind, pattern, needs_digit, value_check). Word boundaries are
/// ASCII (`(?-u:\b)`): secrets are ASCII, and a Unicode boundary would keep the fast engine
/// off any text with a non-ASCII character.
const BUILTIN: &[(&str, &str, bool, bool)] = &[
    (
        "private_key",
        r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----|\z)",
        false,
        false,
    ),
    (
        "aws_access_key",
        r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|APKA)[A-Z0-9]{16}(?-u:\b)",
        false,
        false,
    ),
    (
        "aws_secret_key",
        r#"(?i)aws_?secret_?(?:access_?)?key["']?\s*[:=]\s*["']?(?P<s>[A-Za-z0-9/+=]{40})(?-u:\b)"#,
        false,
        false,
    ),
    (
        "github_token",
        r"(?-u:\b)(?:(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?-u:\b)",
        false,
        false,
    ),
    (
        "gitlab_token",
        r"(?-u:\b)gl(?:pat|dt|rt|ptt|ft|soat|cbt|imt|oas)-[A-Za-z0-9_\-]{20,}",
        false,
        false,
    ),
    (
        "slack_token",
        r"(?-u:\b)xox[abposre]-[A-Za-z0-9\-]{10,}|https://hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+",
        false,
        false,
    ),
    (
        "anthropic_api_key",
        r"(?-u:\b)sk-ant-(?:api|admin)?[0-9]*-?[A-Za-z0-9_\-]{20,}",
        false,
        false,
    ),
    (
        "openai_api_key",
        r"(?-u:\b)sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{32,}",
        true,
        false,
    ),
    (
        "jwt",
        r"(?-u:\b)eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",
        false,
        false,
    ),
    (
        "url_password",
        r"(?-u:\b)[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s:/@]{1,128}:(?P<s>[^\s/@]{1,256})@",
        false,
        true,
    ),
    (
        "password",
        r#"(?i)(?-u:\b)(?:password|passwd|pwd|passphrase)["']?\s*(?:=|:)\s*(?:"(?P<s>[^"\n]{3,200})"|'(?P<s2>[^'\n]{3,200})'|(?P<s3>[^\s"'`,;()\[\]{}<>]{3,}))"#,
        false,
        true,
    ),
    (
        "secret",
        r#"(?i)(?-u:\b)(?:secret|client_secret|secret_key|api_key|apikey|access_key|access_token|auth_token|private_key)["']?\s*(?:=|:)\s*(?:"(?P<s>[^"\n]{8,200})"|'(?P<s2>[^'\n]{8,200})'|(?P<s3>[^\s"'`,;()\[\]{}<>]{8,}))"#,
        false,
        true,
    ),
];

/// For each built-in pattern (same order), literals of which every match holds at least one,
/// compared ASCII case-insensitively: a text holding none of them cannot match the pattern,
/// which is then neither compiled nor run.
const NEEDLES: &[&[&str]] = &[
    &["private key"],
    &[
        "akia", "asia", "abia", "acca", "agpa", "aida", "aroa", "anpa", "anva", "apka",
    ],
    &["aws"],
    &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
    &[
        "glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "glcbt-", "glimt-", "gloas-",
    ],
    &["xox", "hooks.slack.com"],
    &["sk-ant-"],
    &["sk-"],
    &["eyj"],
    &["://"],
    &["password", "passwd", "pwd", "passphrase"],
    &[
        "secret",
        "api_key",
        "apikey",
        "access_key",
        "access_token",
        "auth_token",
        "private_key",
    ],
];

/// The prefilter's literal for private spans (a tag may hold whitespace before the word).
const PRIVATE_NEEDLE: &str = "private";

/// A private tag, opening or closing (the `close` group): `<private>`, `<private >`,
/// `<PRIVATE\t>`, `<private reason="x">`, `</private>`, `< / private >`.
const PRIVATE_TAG: &str = r"(?i)<\s*(?P<close>/\s*)?private(?:\s[^<>]*)?>";

/// The redaction settings: built-in patterns, extra patterns, exceptions and the switch.
///
/// Compiling all the patterns costs more than most commands (about 20 ms of CPU in a release
/// build, mostly Unicode classes), so a pattern is compiled only when a text holds one of its
/// literals ([`NEEDLES`], found in one Aho-Corasick pass): a command that writes ordinary
/// text never pays for it. Extra patterns from the config are compiled (and so checked) when
/// the configuration is read, and run on every text.
pub struct Redactor {
    enabled: bool,
    rules: Vec<Rule>,
    allow_patterns: Vec<String>,
    compiled: OnceLock<Compiled>,
}

/// What the first redaction compiles.
struct Compiled {
    /// Every built-in rule's literals (pattern id → rule index in `owner`) and the private
    /// marker (the last pattern id), to find in one pass which rules can match at all.
    needles: AhoCorasick,
    owner: Vec<usize>,
    allow: Vec<Regex>,
    private_tag: Regex,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("enabled", &self.enabled)
            .field(
                "kinds",
                &self
                    .rules
                    .iter()
                    .map(|r| r.kind.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("allow", &self.allow_patterns.len())
            .finish()
    }
}

impl Default for Redactor {
    /// The built-in patterns, switched on.
    fn default() -> Self {
        Redactor::new(true, &[], &[]).expect("invariant: the built-in patterns compile")
    }
}

/// Compiles a pattern with a bounded program size (a config pattern must not make every
/// write slow or exhaust memory).
fn compile(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .dfa_size_limit(4 << 20)
        .build()
        .map_err(|e| e.to_string())
}

/// Whether `s` holds a private tag, opening or closing, as the redactor reads one: text that
/// must reach the redactor whole (a splitter must not cut a span apart).
pub fn holds_private_tag(s: &str) -> bool {
    static TAG: OnceLock<Regex> = OnceLock::new();
    TAG.get_or_init(|| compile(PRIVATE_TAG).expect("invariant: a fixed pattern"))
        .is_match(s)
}

/// Checks a kind name: 1–40 characters of `a-z 0-9 _`.
pub fn check_kind(kind: &str) -> Result<(), String> {
    if kind.is_empty()
        || kind.len() > 40
        || !kind
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(format!(
            "{kind:?} is not a kind name: use 1 to 40 characters of a-z, 0-9 and _"
        ));
    }
    Ok(())
}

/// Checks a pattern compiles.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    compile(pattern).map(|_| ())
}

impl Redactor {
    /// The built-in patterns plus `extra` (kind, pattern), with `allow` as exceptions.
    pub fn new(
        enabled: bool,
        extra: &[(String, String)],
        allow: &[String],
    ) -> Result<Redactor, String> {
        let mut rules = Vec::new();
        for (kind, p, needs_digit, value_check) in BUILTIN {
            rules.push(Rule {
                kind: kind.to_string(),
                pattern: p.to_string(),
                re: OnceLock::new(),
                needs_digit: *needs_digit,
                value_check: *value_check,
            });
        }
        for (kind, p) in extra {
            check_kind(kind)?;
            // Checked now (a config error is reported before anything runs), kept compiled.
            let re = compile(p).map_err(|e| format!("pattern {p:?}: {e}"))?;
            rules.push(Rule {
                kind: kind.clone(),
                pattern: p.clone(),
                re: OnceLock::from(re),
                needs_digit: false,
                value_check: false,
            });
        }
        for p in allow {
            compile(p).map_err(|e| format!("allow pattern {p:?}: {e}"))?;
        }
        Ok(Redactor {
            enabled,
            rules,
            allow_patterns: allow.to_vec(),
            compiled: OnceLock::new(),
        })
    }

    /// The prefilter, exceptions and private markers, built on first use.
    fn compiled(&self) -> &Compiled {
        self.compiled.get_or_init(|| {
            let mut literals: Vec<&str> = Vec::new();
            let mut owner = Vec::new();
            for (i, list) in NEEDLES.iter().enumerate() {
                for n in *list {
                    literals.push(n);
                    owner.push(i);
                }
            }
            literals.push(PRIVATE_NEEDLE);
            let needles = AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(&literals)
                .expect("invariant: a few short literals build");
            Compiled {
                needles,
                owner,
                allow: self
                    .allow_patterns
                    .iter()
                    .map(|p| compile(p).expect("invariant: checked when the redactor was made"))
                    .collect(),
                private_tag: compile(PRIVATE_TAG).expect("invariant: a fixed pattern"),
            }
        })
    }

    /// Which rules may match `s` (built-ins whose literals it holds, and every extra rule),
    /// and whether it holds a private marker.
    fn candidates(&self, c: &Compiled, s: &str) -> (Vec<usize>, bool) {
        let mut hit = vec![false; self.rules.len()];
        let mut private = false;
        for m in c.needles.find_overlapping_iter(s) {
            match c.owner.get(m.pattern().as_usize()) {
                Some(&i) => hit[i] = true,
                None => private = true,
            }
        }
        for h in hit.iter_mut().skip(NEEDLES.len()) {
            *h = true;
        }
        let rules = hit
            .iter()
            .enumerate()
            .filter(|(_, h)| **h)
            .map(|(i, _)| i)
            .collect();
        (rules, private)
    }

    /// Whether redaction is on.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The text with private spans dropped and secrets replaced; `counts` grows by what went.
    pub fn text<'a>(&self, s: &'a str, counts: &mut Counts) -> Cow<'a, str> {
        if !self.enabled {
            return Cow::Borrowed(s);
        }
        let c = self.compiled();
        let (mut matched, has_private) = self.candidates(c, s);
        let private = if has_private {
            let p = self.drop_private(c, s, counts);
            // Dropping spans joins what was around them: find the literals again.
            if let Cow::Owned(t) = &p {
                matched = self.candidates(c, t).0;
            }
            p
        } else {
            Cow::Borrowed(s)
        };
        if matched.is_empty() {
            return private;
        }
        // Candidate spans of every rule that matched, then the earliest (longest on a tie)
        // wins where they overlap.
        let mut spans: Vec<(usize, usize, usize)> = Vec::new();
        for &i in &matched {
            let rule = &self.rules[i];
            let re = rule.re.get_or_init(|| {
                compile(&rule.pattern).expect("invariant: a built-in pattern compiles (unit test)")
            });
            for whole in re.find_iter(&private) {
                // The fast search finds the match; groups are resolved on it alone (a capture
                // search over a whole large text costs far more).
                let m = if re.captures_len() > 1 {
                    let caps = re
                        .captures_at(&private[..whole.end()], whole.start())
                        .expect("invariant: a found match matches again at its start");
                    ["s", "s2", "s3"]
                        .iter()
                        .find_map(|g| caps.name(g))
                        .or_else(|| caps.get(0))
                        .expect("invariant: group 0 always matches")
                } else {
                    whole
                };
                let found = m.as_str();
                if found.is_empty()
                    || (rule.needs_digit && !found.bytes().any(|b| b.is_ascii_digit()))
                    || (rule.value_check && !looks_secret(found))
                    || c.allow.iter().any(|a| a.is_match(found))
                {
                    continue;
                }
                spans.push((m.start(), m.end(), i));
            }
        }
        if spans.is_empty() {
            return private;
        }
        spans.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut out = String::with_capacity(private.len());
        let mut at = 0;
        for (start, end, i) in spans {
            if start < at {
                continue;
            }
            out.push_str(&private[at..start]);
            let kind = &self.rules[i].kind;
            out.push_str("[REDACTED:");
            out.push_str(kind);
            out.push(']');
            *counts.entry(kind.clone()).or_default() += 1;
            at = end;
        }
        out.push_str(&private[at..]);
        Cow::Owned(out)
    }

    /// Drops `<private>…</private>` spans, nested ones whole with their outer span; an
    /// unclosed span runs to the end. A closing tag outside any span is ordinary text.
    fn drop_private<'a>(&self, c: &Compiled, s: &'a str, counts: &mut Counts) -> Cow<'a, str> {
        let mut out: Option<String> = None;
        // Where the kept text resumes, and how many spans are open.
        let mut at = 0;
        let mut depth = 0usize;
        for tag in c.private_tag.captures_iter(s) {
            let whole = tag.get(0).expect("invariant: group 0 always matches");
            let close = tag.name("close").is_some();
            match (close, depth) {
                (false, 0) => {
                    out.get_or_insert_with(|| String::with_capacity(s.len()))
                        .push_str(&s[at..whole.start()]);
                    *counts.entry("private".to_string()).or_default() += 1;
                    depth = 1;
                }
                (false, _) => depth += 1,
                (true, 0) => {}
                (true, _) => {
                    depth -= 1;
                    if depth == 0 {
                        at = whole.end();
                    }
                }
            }
        }
        let Some(mut out) = out else {
            return Cow::Borrowed(s);
        };
        if depth == 0 {
            out.push_str(&s[at..]);
        }
        Cow::Owned(out)
    }

    /// Redacts every string inside a JSON value, object keys included; `None` when nothing
    /// changed.
    ///
    /// A key that redacts to a key the object already holds (two secrets of one kind, or a
    /// secret beside its own `[REDACTED:kind]`) gets the first free suffix `#2`, `#3`, ...,
    /// given in the order of the original keys, so the same object always redacts to the
    /// same object and no member is lost.
    pub fn value(&self, v: &Value, counts: &mut Counts) -> Option<Value> {
        if !self.enabled {
            return None;
        }
        match v {
            Value::String(s) => match self.text(s, counts) {
                Cow::Owned(t) => Some(Value::String(t)),
                Cow::Borrowed(_) => None,
            },
            Value::Array(items) => {
                let mut changed: Option<Vec<Value>> = None;
                for (i, item) in items.iter().enumerate() {
                    if let Some(new) = self.value(item, counts) {
                        changed.get_or_insert_with(|| items.clone())[i] = new;
                    }
                }
                changed.map(Value::Array)
            }
            Value::Object(map) => self.object(map, counts).map(Value::Object),
            _ => None,
        }
    }

    /// [`Redactor::value`] of an object: its keys, then its members.
    fn object(
        &self,
        map: &serde_json::Map<String, Value>,
        counts: &mut Counts,
    ) -> Option<serde_json::Map<String, Value>> {
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        let renamed: BTreeMap<&str, String> = keys
            .iter()
            .filter_map(|k| match self.text(k, counts) {
                Cow::Owned(t) => Some((k.as_str(), t)),
                Cow::Borrowed(_) => None,
            })
            .collect();
        let members: Vec<(&str, Value)> = keys
            .iter()
            .filter_map(|k| Some((k.as_str(), self.value(&map[k.as_str()], counts)?)))
            .collect();
        if renamed.is_empty() && members.is_empty() {
            return None;
        }
        let mut members: BTreeMap<&str, Value> = members.into_iter().collect();
        // Keys that stay keep their names; a renamed key takes the first free name.
        let mut taken: std::collections::BTreeSet<String> = keys
            .iter()
            .filter(|k| !renamed.contains_key(k.as_str()))
            .map(|k| k.to_string())
            .collect();
        let mut names: BTreeMap<&str, String> = BTreeMap::new();
        for (k, base) in &renamed {
            let mut name = base.clone();
            let mut n = 2;
            while taken.contains(&name) {
                name = format!("{base}#{n}");
                n += 1;
            }
            taken.insert(name.clone());
            names.insert(k, name);
        }
        let mut out = serde_json::Map::new();
        for (k, item) in map {
            let item = members.remove(k.as_str()).unwrap_or_else(|| item.clone());
            let name = names.remove(k.as_str()).unwrap_or_else(|| k.clone());
            out.insert(name, item);
        }
        Some(out)
    }
}

/// Whether an assignment's value looks like a secret rather than code: a plain lower-case
/// identifier (`password=password`, `secret=self.secret`), a placeholder (`${PASS}`, `%s`,
/// `<password>`, `***`) or a type (`Option<String>`) is left alone.
fn looks_secret(v: &str) -> bool {
    let v = v.trim_matches(|c| c == '"' || c == '\'');
    if v.starts_with(['$', '%', '<', '{', '*', '?', '/', '='])
        || v.contains("{{")
        || v.contains("${")
    {
        return false;
    }
    if v.eq_ignore_ascii_case("null")
        || v.eq_ignore_ascii_case("none")
        || v.eq_ignore_ascii_case("true")
        || v.eq_ignore_ascii_case("false")
        || v.eq_ignore_ascii_case("undefined")
        || v.eq_ignore_ascii_case("redacted")
        || v.starts_with("[REDACTED")
    {
        return false;
    }
    // Code: an identifier, a field path or a call (letters, digits, `_` and `.`, starting with
    // a letter, without a digit or an upper-case letter after the first character).
    let identifier = v.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
        && !v.bytes().skip(1).any(|b| b.is_ascii_digit());
    !identifier || v.len() >= 24 && v.bytes().any(|b| b.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn red(s: &str) -> (String, Counts) {
        let mut c = Counts::new();
        let out = Redactor::default().text(s, &mut c).into_owned();
        (out, c)
    }

    #[test]
    fn every_builtin_pattern_compiles_and_nothing_compiles_before_the_first_text() {
        for (kind, p, _, _) in BUILTIN {
            assert!(compile(p).is_ok(), "{kind}");
        }
        let r = Redactor::default();
        assert!(r.compiled.get().is_none());
        assert!(r.rules.iter().all(|rule| rule.re.get().is_none()));
        let mut counts = Counts::new();
        assert_eq!(
            r.text("nothing to hide here", &mut counts),
            "nothing to hide here"
        );
        assert!(r.compiled.get().is_some());
        // Only the rules whose literals a text holds get compiled.
        assert!(r.rules.iter().all(|rule| rule.re.get().is_none()));
        assert_eq!(
            r.text("the PassWord is fine", &mut counts),
            "the PassWord is fine"
        );
        let compiled: Vec<&str> = r
            .rules
            .iter()
            .filter(|rule| rule.re.get().is_some())
            .map(|rule| rule.kind.as_str())
            .collect();
        assert_eq!(compiled, ["password"]);
        // A literal that only appears once a private span is dropped is still found.
        let (out, c) =
            red("key: sk-<private>x</private>ant-api03-abcdefghijklmnopqrstuvwxyz012345");
        assert!(out.contains("[REDACTED:anthropic_api_key]"), "{out}");
        assert_eq!(c.get("private"), Some(&1));
        // A bad extra or allow pattern is still an error at once.
        assert!(Redactor::new(true, &[("x".into(), "(".into())], &[]).is_err());
        assert!(Redactor::new(true, &[], &["[".into()]).is_err());
    }

    #[test]
    fn private_spans_are_dropped_whole() {
        let (out, c) = red("keep <private>drop me</private> this <PRIVATE>and</Private>.");
        assert_eq!(out, "keep  this .");
        assert_eq!(c["private"], 2);
        let (out, _) = red("before <private>unclosed secret");
        assert_eq!(out, "before ");
    }

    #[test]
    fn private_tags_with_whitespace_or_attributes_and_nested_spans_leak_nothing() {
        let cases = [
            ("a <private >x</private > b", "a  b"),
            ("a <PRIVATE\t>x</PRIVATE> b", "a  b"),
            ("a < private>x< / private > b", "a  b"),
            ("a <private reason=\"pin\">x</private> b", "a  b"),
            (
                "a <private>outer <private>inner</private> tail </private> b",
                "a  b",
            ),
            (
                "a <private>1<private>2<private>3</private></private>4</private> b",
                "a  b",
            ),
            // An inner span closed, the outer one never: everything after it goes.
            ("a <private>outer <private>inner</private> tail", "a "),
            // A closing tag outside any span is text; so are words that merely say private.
            ("a </private> b", "a </private> b"),
            (
                "private keys and <privateer> ships",
                "private keys and <privateer> ships",
            ),
        ];
        for (text, want) in cases {
            let (out, _) = red(text);
            assert_eq!(out, want, "{text:?}");
        }
        let (_, c) = red("<private>a<private>b</private></private> and <private>c</private>");
        assert_eq!(c["private"], 2, "one count per outermost span");
    }

    #[test]
    fn object_keys_are_redacted_like_values_and_never_lose_a_member() {
        let aws = format!("AKIA{}", "QWERTYUIOP23ASDF");
        let aws2 = format!("AKIA{}", "ZXCVBNMLKJ45GHJK");
        let v = serde_json::json!({
            aws.clone(): 1,
            "nested": {aws.clone(): "v", "list": [{aws2.clone(): true}]},
            "<private>who</private>name": "x",
        });
        let mut c = Counts::new();
        let out = Redactor::default().value(&v, &mut c).unwrap();
        assert_eq!(
            out,
            serde_json::json!({
                "[REDACTED:aws_access_key]": 1,
                "nested": {"[REDACTED:aws_access_key]": "v", "list": [{"[REDACTED:aws_access_key]": true}]},
                "name": "x",
            })
        );
        assert_eq!(c["aws_access_key"], 3);
        assert_eq!(c["private"], 1);
        // Two keys that redact alike, and one already named like the result: each member
        // stays, under the first free suffix, in the order of the original keys.
        let v =
            serde_json::json!({aws.clone(): 1, aws2.clone(): 2, "[REDACTED:aws_access_key]": 3});
        let out = Redactor::default().value(&v, &mut c).unwrap();
        assert_eq!(
            out,
            serde_json::json!({
                "[REDACTED:aws_access_key]": 3,
                "[REDACTED:aws_access_key]#2": 1,
                "[REDACTED:aws_access_key]#3": 2,
            })
        );
        let again = Redactor::default().value(&v, &mut c).unwrap();
        assert_eq!(out, again, "the same object redacts to the same object");
        let off = Redactor::new(false, &[], &[]).unwrap();
        assert!(off.value(&v, &mut c).is_none());
    }

    #[test]
    fn well_known_secrets_are_replaced_by_their_kind() {
        // Assembled at run time so the source holds no literal secret.
        let gh = format!("ghp_{}", "a1B2".repeat(9));
        let cases = [
            ("key AKIAIOSFODNN7EXAMPLF here", "aws_access_key"),
            (&format!("token {gh}") as &str, "github_token"),
            (&format!("glpat-{}", "x1y2z3".repeat(4)), "gitlab_token"),
            (&format!("xoxb-{}", "1234567890-abc"), "slack_token"),
            (
                &format!("sk-ant-api03-{}", "Ab3_".repeat(10)),
                "anthropic_api_key",
            ),
            (&format!("sk-proj-{}", "Ab3x".repeat(10)), "openai_api_key"),
            (
                &format!(
                    "{}\nMIIEabc\n-----END RSA PRIVATE KEY-----",
                    "-----BEGIN RSA PRIVATE KEY-----"
                ),
                "private_key",
            ),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "jwt",
            ),
            ("postgres://admin:s3cr3t!@db.local/app", "url_password"),
            ("PASSWORD=hunter2", "password"),
            ("password: \"correct horse\"", "password"),
            ("client_secret = 'abcd1234efgh5678'", "secret"),
        ];
        for (text, kind) in cases {
            let (out, c) = red(text);
            assert_eq!(c.get(kind), Some(&1), "{text:?} -> {out:?} {c:?}");
            assert!(out.contains(&format!("[REDACTED:{kind}]")), "{out}");
        }
        let (out, _) = red("postgres://admin:s3cr3t!@db.local/app");
        assert_eq!(out, "postgres://admin:[REDACTED:url_password]@db.local/app");
        let (out, _) = red("export PASSWORD=hunter2 now");
        assert_eq!(out, "export PASSWORD=[REDACTED:password] now");
    }

    #[test]
    fn ordinary_code_and_prose_are_left_alone() {
        for text in [
            "commit 4897191e3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a87 fixed it",
            "id 550e8400-e29b-41d4-a716-446655440000",
            "connect(password=password, user=user)",
            "let secret = self.secret.clone();",
            "password: Option<String>,",
            "PASSWORD=${DB_PASSWORD}",
            "become [REDACTED:kind]: password=/secret= assignments",
            "the task-runner script sk-learn-models",
            "https://example.com:8080/path?x=1",
            "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
            "blake3 af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
        ] {
            let (out, c) = red(text);
            assert!(c.is_empty(), "{text:?} -> {out:?} {c:?}");
        }
    }

    #[test]
    fn allow_patterns_and_extra_patterns_apply() {
        let r = Redactor::new(
            true,
            &[("ticket".into(), r"TKT-[0-9]{6}".into())],
            &["EXAMPLE".into()],
        )
        .unwrap();
        let mut c = Counts::new();
        let out = r.text("AKIAIOSFODNN7EXAMPLE and TKT-123456", &mut c);
        assert_eq!(out, "AKIAIOSFODNN7EXAMPLE and [REDACTED:ticket]");
        assert!(Redactor::new(true, &[("Bad Kind".into(), "x".into())], &[]).is_err());
        assert!(Redactor::new(true, &[("k".into(), "(".into())], &[]).is_err());
        let off = Redactor::new(false, &[], &[]).unwrap();
        assert_eq!(off.text("PASSWORD=hunter2", &mut c), "PASSWORD=hunter2");
    }

    #[test]
    fn json_values_are_redacted_in_place() {
        let v = serde_json::json!({"a": ["x", "PASSWORD=hunter2"], "b": {"c": 1, "d": "<private>p</private>ok"}});
        let mut c = Counts::new();
        let out = Redactor::default().value(&v, &mut c).unwrap();
        assert_eq!(
            out,
            serde_json::json!({"a": ["x", "PASSWORD=[REDACTED:password]"], "b": {"c": 1, "d": "ok"}})
        );
        assert!(
            Redactor::default()
                .value(&serde_json::json!({"a": 1}), &mut c)
                .is_none()
        );
    }
}
