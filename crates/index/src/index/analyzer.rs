//! The text analyzer: how indexed text and BM25 queries become terms.
//!
//! A hand-written scanner splits words so that every script stays findable (CJK ideographs,
//! kana and emoji one token each); the words are then lower-cased, stripped of combining
//! accents and folded to ASCII, and, for a language, stemmed with its stop words removed. The
//! analyzer's name is part of the schema, so a change of analyzer rebuilds the index.

use serde::{Deserialize, Serialize};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter,
    TextAnalyzer, Token, TokenFilter, TokenStream, Tokenizer,
};

use super::schema::INDEX_SCHEMA_VERSION;
use memdir_api::error::{Error, Result};

/// How a character takes part in a word.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CharClass {
    /// Part of a word: letters, digits, and marks or letters of any script.
    Word,
    /// A word on its own: CJK ideographs and kana (so CJK substrings become phrases of
    /// characters) and emoji.
    Single,
    /// Separates words: white space, punctuation, symbols.
    Separator,
}

fn char_class(c: char) -> CharClass {
    if c.is_ascii() {
        return if c.is_ascii_alphanumeric() {
            CharClass::Word
        } else {
            CharClass::Separator
        };
    }
    let u = c as u32;
    let single = matches!(u,
        0x3040..=0x30FF | 0x31F0..=0x31FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF
        | 0x20000..=0x2FA1F
        | 0x1F000..=0x1FAFF | 0x2600..=0x27BF | 0x2B00..=0x2BFF | 0x2300..=0x23FF);
    if single {
        return CharClass::Single;
    }
    let separator = c.is_whitespace()
        || matches!(u,
            0x80..=0xBF | 0xD7 | 0xF7 | 0x2000..=0x206F | 0x20A0..=0x20CF | 0x2100..=0x22FF
            | 0x2400..=0x25FF | 0x27C0..=0x2AFF | 0x2E00..=0x2E7F | 0x3000..=0x303F
            | 0xFE10..=0xFE1F | 0xFE30..=0xFE6F | 0xFF00..=0xFF0F | 0xFF1A..=0xFF20
            | 0xFF3B..=0xFF40 | 0xFF5B..=0xFF65 | 0xFFF0..=0xFFFF);
    if separator {
        CharClass::Separator
    } else {
        CharClass::Word
    }
}

/// Splits text into words: runs of letters, digits and marks of any script; CJK ideographs,
/// kana and emoji one token each; everything else separates. A hand-written scanner, several
/// times faster than the equivalent regular expression.
#[derive(Clone, Default)]
struct WordTokenizer {
    token: Token,
}

struct WordStream<'a> {
    text: &'a str,
    pos: usize,
    token: &'a mut Token,
}

impl Tokenizer for WordTokenizer {
    type TokenStream<'a> = WordStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordStream<'a> {
        self.token.reset();
        self.token.position = usize::MAX;
        WordStream {
            text,
            pos: 0,
            token: &mut self.token,
        }
    }
}

impl TokenStream for WordStream<'_> {
    fn advance(&mut self) -> bool {
        let rest = &self.text[self.pos..];
        let mut start = None;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match (char_class(c), start) {
                (CharClass::Separator, None) => {}
                (CharClass::Separator, Some(_)) => {
                    end = i;
                    break;
                }
                (CharClass::Single, None) => {
                    start = Some(i);
                    end = i + c.len_utf8();
                    break;
                }
                (CharClass::Single, Some(_)) => {
                    end = i;
                    break;
                }
                (CharClass::Word, None) => start = Some(i),
                (CharClass::Word, Some(_)) => {}
            }
        }
        let Some(start) = start else {
            self.pos = self.text.len();
            return false;
        };
        let (from, to) = (self.pos + start, self.pos + end);
        self.pos = to;
        self.token.text.clear();
        self.token.text.push_str(&self.text[from..to]);
        self.token.offset_from = from;
        self.token.offset_to = to;
        self.token.position = self.token.position.wrapping_add(1);
        true
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

/// Removes combining diacritical marks (U+0300..U+036F), so an accent typed as a separate
/// mark (`e` + U+0301, as some systems write `é`) folds like the precomposed letter. Marks of
/// other blocks, which carry vowels in Indic scripts, stay.
#[derive(Clone)]
struct StripMarks;

#[derive(Clone)]
struct StripMarksFilter<T> {
    inner: T,
}

struct StripMarksStream<T> {
    tail: T,
}

fn is_combining_diacritic(c: char) -> bool {
    ('\u{0300}'..='\u{036F}').contains(&c)
}

impl TokenFilter for StripMarks {
    type Tokenizer<T: Tokenizer> = StripMarksFilter<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> StripMarksFilter<T> {
        StripMarksFilter { inner: tokenizer }
    }
}

impl<T: Tokenizer> Tokenizer for StripMarksFilter<T> {
    type TokenStream<'a> = StripMarksStream<T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        StripMarksStream {
            tail: self.inner.token_stream(text),
        }
    }
}

impl<T: TokenStream> TokenStream for StripMarksStream<T> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        let text = &mut self.tail.token_mut().text;
        if !text.is_ascii() && text.chars().any(is_combining_diacritic) {
            *text = text
                .chars()
                .filter(|c| !is_combining_diacritic(*c))
                .collect();
        }
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
}

/// The text analyzer: a language's stemmer and stop words, or plain lower-cased words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalyzerConfig {
    /// `english` (default), another Snowball language, or `none`.
    pub language: String,
    /// Whether stop words are removed (when the language has a list).
    pub stop_words: bool,
}

impl Default for AnalyzerConfig {
    fn default() -> Self {
        AnalyzerConfig {
            language: "english".into(),
            stop_words: true,
        }
    }
}

fn language(name: &str) -> Option<Language> {
    Some(match name {
        "arabic" => Language::Arabic,
        "danish" => Language::Danish,
        "dutch" => Language::Dutch,
        "english" => Language::English,
        "finnish" => Language::Finnish,
        "french" => Language::French,
        "german" => Language::German,
        "greek" => Language::Greek,
        "hungarian" => Language::Hungarian,
        "italian" => Language::Italian,
        "norwegian" => Language::Norwegian,
        "portuguese" => Language::Portuguese,
        "romanian" => Language::Romanian,
        "russian" => Language::Russian,
        "spanish" => Language::Spanish,
        "swedish" => Language::Swedish,
        "tamil" => Language::Tamil,
        "turkish" => Language::Turkish,
        _ => return None,
    })
}

impl AnalyzerConfig {
    /// Parses `english`, `none`, `german-nostop`, ...
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim().to_lowercase();
        let (lang, stop) = match s.strip_suffix("-nostop") {
            Some(l) => (l.to_string(), false),
            None => (s.clone(), true),
        };
        if lang != "none" && language(&lang).is_none() {
            return Err(Error::invalid("analyzer", format!("unknown analyzer language {lang:?}"))
                .hint("use english, french, german, spanish, italian, portuguese, dutch, swedish, norwegian, danish, finnish, russian, hungarian, romanian, turkish, greek, arabic, tamil, or none"));
        }
        Ok(AnalyzerConfig {
            language: lang,
            stop_words: stop && s != "none",
        })
    }

    /// The tokenizer name registered with tantivy; part of the schema, so a change of analyzer
    /// is a change of schema.
    pub fn tokenizer_name(&self) -> String {
        format!(
            "memdir_{}_{}_v{INDEX_SCHEMA_VERSION}",
            self.language,
            if self.stop_words { "stop" } else { "all" }
        )
    }

    /// The analyzer for indexed text and BM25 queries.
    pub fn build(&self) -> Result<TextAnalyzer> {
        let base = TextAnalyzer::builder(WordTokenizer::default())
            .filter(RemoveLongFilter::limit(512))
            .filter(LowerCaser)
            .filter(StripMarks)
            .filter(AsciiFoldingFilter);
        Ok(match language(&self.language) {
            None => base.build(),
            Some(lang) => match StopWordFilter::new(lang).filter(|_| self.stop_words) {
                Some(stop) => base.filter(stop).filter(Stemmer::new(lang)).build(),
                None => base.filter(Stemmer::new(lang)).build(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tantivy::tokenizer::TokenStream;

    fn tokens(cfg: &AnalyzerConfig, s: &str) -> Vec<String> {
        let mut a = cfg.build().unwrap();
        let mut ts = a.token_stream(s);
        let mut out = Vec::new();
        while let Some(t) = ts.next() {
            out.push(t.text.clone());
        }
        out
    }

    #[test]
    fn english_stems_and_drops_stop_words() {
        let cfg = AnalyzerConfig::default();
        assert_eq!(
            tokens(&cfg, "The pools were timing out"),
            vec!["pool", "were", "time", "out"]
        );
        assert_eq!(
            tokens(&cfg, "max_size=10 at 127.0.0.1:5432"),
            vec!["max", "size", "10", "127", "0", "0", "1", "5432"]
        );
    }

    #[test]
    fn any_script_stays_findable() {
        let cfg = AnalyzerConfig::parse("none").unwrap();
        assert_eq!(tokens(&cfg, "東京大学"), vec!["東", "京", "大", "学"]);
        assert_eq!(tokens(&cfg, "café déjà vu"), vec!["cafe", "deja", "vu"]);
        assert_eq!(tokens(&cfg, "cafe\u{301}"), vec!["cafe"]);
        assert_eq!(
            tokens(&cfg, "ship it 🚀 now"),
            vec!["ship", "it", "🚀", "now"]
        );
        assert_eq!(tokens(&cfg, "Привет мир"), vec!["привет", "мир"]);
        assert_eq!(tokens(&cfg, "नमस्ते दुनिया"), vec!["नमस्ते", "दुनिया"]);
        assert_eq!(
            tokens(&cfg, "東京に行きました!"),
            vec!["東", "京", "に", "行", "き", "ま", "し", "た"]
        );
        assert_eq!(
            tokens(&cfg, "«quoted» — dash…end"),
            vec!["quoted", "dash", "end"]
        );
        assert_eq!(tokens(&cfg, "a🚀b"), vec!["a", "🚀", "b"]);
    }

    #[test]
    fn analyzer_config_parses() {
        assert_eq!(
            AnalyzerConfig::parse("English").unwrap(),
            AnalyzerConfig::default()
        );
        assert!(!AnalyzerConfig::parse("german-nostop").unwrap().stop_words);
        assert!(AnalyzerConfig::parse("klingon").is_err());
    }
}
