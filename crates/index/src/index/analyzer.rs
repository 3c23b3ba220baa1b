//! The text analyzer: how indexed text and BM25 queries become terms.
//!
//! A hand-written scanner splits words so that every script stays findable (CJK ideographs,
//! kana and emoji one token each); the words are then lower-cased, stripped of combining
//! accents and folded to ASCII, and, for a language, stemmed with its stop words removed. The
//! analyzer's name is part of the schema, so a change of analyzer rebuilds the index.

use std::cell::RefCell;
use std::sync::Arc;

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

/// The analyzer as the index uses it: the terms of the last few texts it analysed on this
/// thread are kept, and the same text again is given those terms instead of being analysed
/// anew. A chunk's text is indexed twice, as itself and as the next chunk's previous turn
/// (`context`), one document after the other on one indexing thread; the second time costs a
/// copy instead of the words' folding and stemming. The terms depend only on the analyzer and
/// the text, so a remembered answer is the answer.
#[derive(Clone)]
pub(super) struct Remembering {
    inner: TextAnalyzer,
    /// The analyzer's name: a thread may analyse for indexes with different analyzers.
    name: Arc<str>,
    tokens: Vec<Token>,
}

/// One text and its terms, as last analysed on this thread.
#[derive(Default)]
struct Remembered {
    analyzer: Option<Arc<str>>,
    text: String,
    tokens: Vec<Token>,
    len: usize,
}

/// Texts remembered per thread. Two would do if every previous turn were found: a chunk's text,
/// then the next chunk's own, then the first again as its previous turn. But a previous turn
/// not found (the first document a thread gets) is remembered too, and with two places it
/// pushes out the text the next document needs, and so on for good.
const REMEMBERED: usize = 4;

/// Longer texts are not remembered: a thread keeps what it remembers for as long as it lives.
const REMEMBER_MAX_BYTES: usize = 16 * 1024;

thread_local! {
    /// The last [`REMEMBERED`] texts analysed on this thread, the oldest replaced next.
    static RECENT: RefCell<([Remembered; REMEMBERED], usize)> = RefCell::default();
}

/// Sets `to[i]` to `from`, reusing the token's string there.
fn put(to: &mut Vec<Token>, i: usize, from: &Token) {
    match to.get_mut(i) {
        None => to.push(from.clone()),
        Some(t) => {
            t.offset_from = from.offset_from;
            t.offset_to = from.offset_to;
            t.position = from.position;
            t.position_length = from.position_length;
            t.text.clone_from(&from.text);
        }
    }
}

impl Tokenizer for Remembering {
    type TokenStream<'a> = Replay<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Replay<'a> {
        let name = &self.name;
        let tokens = &mut self.tokens;
        let found = RECENT.with_borrow(|(slots, _)| {
            let r = slots
                .iter()
                .find(|r| r.analyzer.as_ref() == Some(name) && r.text == text)?;
            for (i, t) in r.tokens[..r.len].iter().enumerate() {
                put(tokens, i, t);
            }
            Some(r.len)
        });
        #[cfg(test)]
        tests::HITS.with(|h| h.set(h.get() + usize::from(found.is_some())));
        let len = found.unwrap_or_else(|| {
            let mut len = 0;
            let mut ts = self.inner.token_stream(text);
            while ts.advance() {
                put(tokens, len, ts.token());
                len += 1;
            }
            drop(ts);
            if text.len() > REMEMBER_MAX_BYTES {
                return len;
            }
            RECENT.with_borrow_mut(|(slots, next)| {
                let r = &mut slots[*next];
                *next = (*next + 1) % REMEMBERED;
                r.analyzer = Some(name.clone());
                r.text.clear();
                r.text.push_str(text);
                for (i, t) in tokens[..len].iter().enumerate() {
                    put(&mut r.tokens, i, t);
                }
                r.len = len;
            });
            len
        });
        Replay {
            tokens: &mut self.tokens[..len],
            at: None,
        }
    }
}

/// The terms of one text, given again.
pub(super) struct Replay<'a> {
    tokens: &'a mut [Token],
    at: Option<usize>,
}

impl TokenStream for Replay<'_> {
    fn advance(&mut self) -> bool {
        let next = self.at.map_or(0, |i| i + 1);
        if next < self.tokens.len() {
            self.at = Some(next);
            true
        } else {
            false
        }
    }

    fn token(&self) -> &Token {
        &self.tokens[self
            .at
            .expect("invariant: token() follows an advance() that gave one")]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self
            .at
            .expect("invariant: token_mut() follows an advance() that gave one")]
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

    /// The analyzer the index registers: [`AnalyzerConfig::build`], with the terms of recent
    /// texts remembered ([`Remembering`]).
    pub fn build_remembering(&self) -> Result<TextAnalyzer> {
        Ok(TextAnalyzer::from(Remembering {
            inner: self.build()?,
            name: self.tokenizer_name().into(),
            tokens: Vec::new(),
        }))
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

    fn all_of(a: &mut TextAnalyzer, s: &str) -> Vec<(String, usize, usize, usize)> {
        let mut ts = a.token_stream(s);
        let mut out = Vec::new();
        while let Some(t) = ts.next() {
            out.push((t.text.clone(), t.position, t.offset_from, t.offset_to));
        }
        out
    }

    #[test]
    fn a_remembered_text_gets_the_terms_the_analyzer_gives() {
        let english = AnalyzerConfig::default();
        let none = AnalyzerConfig::parse("none").unwrap();
        let (mut plain_en, mut plain_none) = (english.build().unwrap(), none.build().unwrap());
        // Two fields' analyzers of one index share what this thread remembers, and a second
        // index's analyzer (another language) must not take its terms.
        let mut content = english.build_remembering().unwrap();
        let mut context = english.build_remembering().unwrap();
        let mut other = none.build_remembering().unwrap();
        let texts = [
            "The pools were timing out at 127.0.0.1:5432",
            "Jon adopted a ginger tabby, barely one",
            "",
            "東京に行きました! café déjà vu",
            "The pools were timing out at 127.0.0.1:5432",
        ];
        for (i, t) in texts.iter().enumerate() {
            let want = all_of(&mut plain_en, t);
            assert_eq!(all_of(&mut content, t), want, "{t:?} as itself");
            if i > 0 {
                let prev = texts[i - 1];
                assert_eq!(all_of(&mut context, prev), all_of(&mut plain_en, prev));
            }
            assert_eq!(
                all_of(&mut other, t),
                all_of(&mut plain_none, t),
                "{t:?} unstemmed"
            );
            assert_eq!(all_of(&mut context, t), want, "{t:?} again");
        }
        assert_ne!(
            all_of(&mut content, texts[0]),
            all_of(&mut other, texts[0]),
            "the two analyzers differ on this text, so the check above means something"
        );
        let mut ts = content.token_stream("");
        assert!(!ts.advance());
    }

    thread_local! {
        /// Texts given remembered terms on this thread.
        pub(super) static HITS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// The order an indexing thread analyses a session's documents in: each chunk's text, then
    /// the previous chunk's as its previous turn. Every previous turn but the first (which this
    /// thread never saw as a chunk) is remembered, however many there are.
    #[test]
    fn each_previous_turn_is_remembered_from_the_chunk_before() {
        let mut content = AnalyzerConfig::default().build_remembering().unwrap();
        let mut context = AnalyzerConfig::default().build_remembering().unwrap();
        let texts: Vec<String> = (0..50)
            .map(|i| format!("turn {i} about the pools timing out"))
            .collect();
        HITS.with(|h| h.set(0));
        for i in 1..texts.len() {
            all_of(&mut content, &texts[i]);
            all_of(&mut context, &texts[i - 1]);
        }
        assert_eq!(HITS.with(|h| h.get()), texts.len() - 2);
        // A long text is analysed every time, and right all the same.
        let long = "pools timing out ".repeat(REMEMBER_MAX_BYTES / 10);
        let want = all_of(&mut AnalyzerConfig::default().build().unwrap(), &long);
        HITS.with(|h| h.set(0));
        assert_eq!(all_of(&mut content, &long), want);
        assert_eq!(all_of(&mut context, &long), want);
        assert_eq!(HITS.with(|h| h.get()), 0);
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
