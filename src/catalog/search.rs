//! `search_tools`' ranking: BM25F over each tool's name (split into words), title,
//! description, parameter names and descriptions, and server name, with words stemmed
//! and a query widened by a small table of synonyms; a query that is a tool's name, or
//! nearly, ranks that tool first.
//!
//! The index is built from the catalog once, on the first search, and bounded: each text
//! a tool brings is cut at [`MAX_FIELD_CHARS`], a query at [`MAX_QUERY_CHARS`].

use std::collections::HashMap;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};
use serde_json::Value;

use super::Entry;
use crate::plan::fold_name;

/// Text taken from one field of one tool: a description longer than this says nothing a
/// search needs that its start does not.
const MAX_FIELD_CHARS: usize = 4_000;
/// Text taken from a query.
pub const MAX_QUERY_CHARS: usize = 500;
/// Parameters read from one input schema (top level and one level down).
const MAX_PARAMS: usize = 64;

/// What a tool is searched by, in the order of [`WEIGHTS`].
#[derive(Clone, Copy)]
enum Field {
    Name = 0,
    Title,
    Description,
    Params,
    Server,
}
const FIELDS: usize = 5;
/// How much a word counts in each field: a name says what a tool does, a parameter what
/// it works on.
const WEIGHTS: [f32; FIELDS] = [2.0, 2.0, 1.0, 0.5, 1.5];
/// Length normalisation per field: names and server names are short by nature.
const B: [f32; FIELDS] = [0.3, 0.3, 0.75, 0.75, 0.0];
/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// How much a synonym of a query word counts, against the word itself.
const SYNONYM_WEIGHT: f32 = 0.5;

/// One tool as the index sees it.
struct Doc {
    /// Each word's count in each field.
    terms: HashMap<String, [u16; FIELDS]>,
    /// Words per field.
    len: [u32; FIELDS],
    /// The exported and the bare name, folded (case and `-`/`_` ignored), for exact and
    /// near-exact matches.
    names: [String; 2],
    /// Whether the tool only reads (its tier).
    reads: bool,
}

/// The index over a catalog's tools, in the catalog's order.
pub struct Index {
    docs: Vec<Doc>,
    /// Inverse document frequency of each word.
    idf: HashMap<String, f32>,
    avg_len: [f32; FIELDS],
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Index({} tools, {} words)",
            self.docs.len(),
            self.idf.len()
        )
    }
}

/// How a tool matched a query: exact name first, then near-exact, then by score.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
struct Rank {
    name: u8,
    score: f32,
}

impl Index {
    /// Indexes `entries`.
    pub fn build(entries: &[Entry]) -> Self {
        let docs: Vec<Doc> = entries.iter().map(doc).collect();
        let mut df: HashMap<&str, u32> = HashMap::new();
        let mut total = [0f32; FIELDS];
        for doc in &docs {
            for term in doc.terms.keys() {
                *df.entry(term.as_str()).or_default() += 1;
            }
            for (sum, len) in total.iter_mut().zip(doc.len) {
                *sum += len as f32;
            }
        }
        let n = docs.len().max(1) as f32;
        let idf = df
            .into_iter()
            .map(|(term, df)| {
                let df = df as f32;
                (term.to_owned(), (1.0 + (n - df + 0.5) / (df + 0.5)).ln())
            })
            .collect();
        let avg_len = total.map(|sum| (sum / n).max(1.0));
        Index { docs, idf, avg_len }
    }

    /// The tools that match `query`, best first, as positions in the catalog; `keep`
    /// says which may be returned (a server filter).
    pub fn search(&self, query: &str, keep: impl Fn(usize) -> bool) -> Vec<usize> {
        let query = head(query.trim(), MAX_QUERY_CHARS);
        let folded = fold_name(query);
        let terms = self.query_terms(query);
        let asks = asks(query);
        let mut ranked: Vec<(Rank, usize)> = self
            .docs
            .iter()
            .enumerate()
            .filter(|(i, _)| keep(*i))
            .map(|(i, doc)| {
                let rank = Rank {
                    name: name_match(doc, &folded),
                    score: self.score(doc, &terms)
                        * if asks && doc.reads { READ_BOOST } else { 1.0 },
                };
                (rank, i)
            })
            .filter(|(rank, _)| rank.name > 0 || rank.score > 0.0)
            .collect();
        ranked.sort_by(|(a, i), (b, j)| {
            b.partial_cmp(a)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(i.cmp(j))
        });
        ranked.into_iter().map(|(_, i)| i).collect()
    }

    /// The query's words, each with the forms a tool may have it in: itself, and its
    /// synonyms at [`SYNONYM_WEIGHT`]. A word neither the catalog nor its synonyms have
    /// is dropped.
    fn query_terms(&self, query: &str) -> Vec<QueryWord> {
        let mut seen: Vec<String> = Vec::new();
        let mut terms = Vec::new();
        for word in words(query) {
            if seen.contains(&word) {
                continue;
            }
            let mut forms: Vec<(&str, f32)> = Vec::new();
            let mut idf = self.idf.get(&word).copied();
            if idf.is_some() {
                forms.push((word.as_str(), 1.0));
            }
            for synonym in synonyms(&word) {
                if let Some(&own) = self.idf.get(synonym) {
                    forms.push((synonym, SYNONYM_WEIGHT));
                    idf.get_or_insert(own);
                }
            }
            if forms.is_empty() {
                // An unknown word may still share its start with words of the catalog
                // (`memorized`, `memory`): each such word counts as a synonym.
                for (term, own) in self.idf.iter().filter(|(t, _)| same_start(t, &word)) {
                    forms.push((term.as_str(), SYNONYM_WEIGHT));
                    idf = Some(idf.map_or(*own, |i: f32| i.max(*own)));
                }
            }
            if let Some(idf) = idf {
                let forms = forms.into_iter().map(|(f, w)| (f.to_owned(), w)).collect();
                terms.push(QueryWord { idf, forms });
            }
            seen.push(word);
        }
        terms
    }

    /// BM25F of one tool for the query's words: each word's forms add up in each field
    /// before saturating, so a word found twice (itself and a synonym) is not counted as
    /// two words.
    fn score(&self, doc: &Doc, terms: &[QueryWord]) -> f32 {
        let mut score = 0.0;
        for word in terms {
            let mut weighted = 0.0;
            for (form, factor) in &word.forms {
                let Some(tf) = doc.terms.get(form) else {
                    continue;
                };
                for f in 0..FIELDS {
                    if tf[f] == 0 {
                        continue;
                    }
                    let norm = 1.0 - B[f] + B[f] * doc.len[f] as f32 / self.avg_len[f];
                    weighted += factor * WEIGHTS[f] * tf[f] as f32 / norm;
                }
            }
            score += word.idf * weighted / (K1 + weighted);
        }
        score
    }
}

/// How much more a tool that only reads counts for a query that asks rather than acts.
/// (Measured over the labelled queries, benches/search: 1.3 took recall@5 from 0.721 to
/// 0.749 and the held-out third from 0.726 to 0.758; 1.15 and 2.0 did less. Favouring
/// the tools that change something for the other queries lowered both.)
const READ_BOOST: f32 = 1.3;

/// Whether `query` asks for something (a question, or a request to show, list or find)
/// rather than to do something: what a read-only tool answers.
fn asks(query: &str) -> bool {
    const ASKING: [&str; 24] = [
        "what", "which", "who", "whom", "whose", "where", "when", "how", "why", "is", "are", "was",
        "were", "do", "does", "did", "can", "has", "have", "show", "list", "find", "look", "see",
    ];
    // "who's" asks as "who" does.
    let first = query
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())
        .map(str::to_lowercase);
    query.trim_end().ends_with('?') || first.is_some_and(|w| ASKING.contains(&w.as_str()))
}

/// Whether two words share a start of at least five characters, or one of at least
/// four is the start of the other.
fn same_start(a: &str, b: &str) -> bool {
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    common >= 5 || common >= 4 && common == a.chars().count().min(b.chars().count())
}

/// One word of a query: its IDF (or its first synonym's when the catalog lacks the word)
/// and the forms that count for it, with their weights.
struct QueryWord {
    idf: f32,
    forms: Vec<(String, f32)>,
}

/// 2 when the query is the tool's exported or bare name (case and `-`/`_` ignored), 1
/// when it is within two edits of one, else 0.
fn name_match(doc: &Doc, folded: &str) -> u8 {
    if folded.is_empty() {
        return 0;
    }
    if doc.names.iter().any(|name| name == folded) {
        return 2;
    }
    let near = folded.len() >= 5
        && folded.len() <= super::MAX_NAME_LEN * 2
        && doc
            .names
            .iter()
            .any(|name| strsim::levenshtein(name, folded) <= 2);
    u8::from(near)
}

/// The first `max` characters of `text`.
fn head(text: &str, max: usize) -> &str {
    text.char_indices()
        .nth(max)
        .map_or(text, |(end, _)| &text[..end])
}

/// What the index keeps of one tool.
fn doc(entry: &Entry) -> Doc {
    let definition = &entry.definition;
    let mut terms: HashMap<String, [u16; FIELDS]> = HashMap::new();
    let mut len = [0u32; FIELDS];
    let mut add = |field: Field, text: &str| {
        for word in words(head(text, MAX_FIELD_CHARS)) {
            let counts = terms.entry(word).or_default();
            counts[field as usize] = counts[field as usize].saturating_add(1);
            len[field as usize] += 1;
        }
    };
    add(Field::Name, &entry.tool);
    if let Some(title) = &definition.title {
        add(Field::Title, title);
    }
    if let Some(title) = definition
        .annotations
        .as_ref()
        .and_then(|a| a.title.as_ref())
    {
        add(Field::Title, title);
    }
    if let Some(description) = &definition.description {
        add(Field::Description, description);
    }
    let mut params = String::new();
    for (name, description) in params_of(&definition.input_schema) {
        params.push_str(name);
        params.push(' ');
        params.push_str(description);
        params.push(' ');
    }
    add(Field::Params, &params);
    add(Field::Server, &entry.server);
    Doc {
        terms,
        len,
        names: [fold_name(entry.exported.as_str()), fold_name(&entry.tool)],
        reads: entry.tier == crate::policy::Tier::Read,
    }
}

/// Parameter names and descriptions: the schema's properties and theirs, one level down,
/// at most [`MAX_PARAMS`].
fn params_of(schema: &serde_json::Map<String, Value>) -> Vec<(&str, &str)> {
    let mut found = Vec::new();
    let mut pending = vec![schema];
    for _ in 0..2 {
        let mut next = Vec::new();
        for schema in pending {
            let Some(Value::Object(properties)) = schema.get("properties") else {
                continue;
            };
            for (name, property) in properties {
                if found.len() == MAX_PARAMS {
                    return found;
                }
                let description = property.get("description").and_then(Value::as_str);
                found.push((name.as_str(), description.unwrap_or_default()));
                if let Value::Object(inner) = property {
                    next.push(inner);
                    if let Some(Value::Object(items)) = inner.get("items") {
                        next.push(items);
                    }
                }
            }
        }
        pending = next;
    }
    found
}

/// The words of a text: split at anything not a letter or digit and at case changes
/// (`getFileContents`, `HTTPRequest`), lowercased, stemmed, without stop words.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    pieces(text).filter_map(|piece| {
        let lower = piece.to_lowercase();
        if lower.len() < 2 && !lower.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        if STOP_WORDS.binary_search(&lower.as_str()).is_ok() {
            return None;
        }
        Some(STEMMER.stem(&lower).into_owned())
    })
}

/// `text` split into words at non-alphanumerics and case changes.
fn pieces(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|run| !run.is_empty())
        .flat_map(|run| {
            let chars: Vec<(usize, char)> = run.char_indices().collect();
            let mut cuts = vec![0];
            for k in 1..chars.len() {
                let (at, c) = chars[k];
                let prev = chars[k - 1].1;
                let next_lower = chars.get(k + 1).is_some_and(|(_, n)| n.is_lowercase());
                // aB → a|B; ABc → A|Bc
                if c.is_uppercase() && (prev.is_lowercase() || prev.is_uppercase() && next_lower) {
                    cuts.push(at);
                }
            }
            cuts.push(run.len());
            cuts.windows(2)
                .map(|w| &run[w[0]..w[1]])
                .collect::<Vec<_>>()
        })
}

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// Words that say nothing about what a tool does (sorted, for binary search).
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can",
    "could", "do", "does", "for", "from", "has", "have", "how", "i", "if", "in", "into", "is",
    "it", "its", "me", "my", "of", "on", "or", "our", "please", "should", "so", "some", "that",
    "the", "their", "them", "then", "there", "these", "this", "those", "to", "us", "using", "via",
    "want", "was", "we", "were", "what", "when", "where", "which", "will", "with", "would", "you",
    "your",
];

/// Words that often stand for one another in tool catalogs and in the way people ask for
/// them. A word may be in several groups.
const SYNONYMS: &[&[&str]] = &[
    &[
        "create", "make", "new", "add", "generate", "insert", "submit",
    ],
    &[
        "delete", "remove", "erase", "destroy", "drop", "clear", "trash", "purge", "forget",
    ],
    &[
        "get", "fetch", "read", "retrieve", "show", "view", "display", "load", "download", "open",
    ],
    &["write", "save", "store", "persist"],
    &[
        "find", "search", "lookup", "query", "locate", "grep", "look",
    ],
    &["list", "enumerate", "browse"],
    &[
        "update", "edit", "modify", "change", "alter", "patch", "set", "replace",
    ],
    &["run", "execute", "invoke", "launch", "trigger", "perform"],
    &[
        "image",
        "picture",
        "screenshot",
        "snapshot",
        "photo",
        "capture",
        "screen",
    ],
    &[
        "web", "page", "website", "site", "url", "uri", "browser", "internet", "online", "link",
    ],
    &["click", "press", "tap", "hit"],
    &["key", "keyboard", "keystroke", "press", "enter"],
    &["type", "enter", "fill", "input"],
    &["message", "chat", "send", "notify", "reply", "dm"],
    &["user", "member", "people", "person", "profile", "account"],
    &["issue", "bug", "ticket", "problem"],
    &["pr", "pull", "merge"],
    &["repository", "repo", "project", "codebase"],
    &["commit", "revision", "history", "log", "version"],
    &["directory", "folder", "dir", "tree"],
    &["file", "document", "doc"],
    &["time", "clock", "date", "hour", "timezone", "zone", "now"],
    &["weather", "forecast", "temperature", "rain"],
    &[
        "map",
        "location",
        "place",
        "address",
        "direction",
        "route",
        "distance",
        "geocode",
        "nearby",
    ],
    &[
        "entity",
        "relation",
        "graph",
        "memory",
        "knowledge",
        "remember",
        "memorize",
        "fact",
        "observation",
    ],
    &[
        "think",
        "thought",
        "reason",
        "reflect",
        "puzzle",
        "hypothesis",
    ],
    &["database", "db", "sql", "table", "row", "tracker"],
    &[
        "cluster",
        "pod",
        "deployment",
        "kubernetes",
        "k8s",
        "container",
        "context",
    ],
    &["wait", "sleep", "pause", "delay", "hold", "until"],
    &["close", "shut", "exit", "quit", "stop"],
    &["navigate", "go", "visit", "goto", "back", "forward"],
    &["tab", "window"],
    &["compare", "diff", "difference"],
    &["copy", "duplicate", "clone"],
    &["move", "rename", "relocate"],
    &[
        "info",
        "metadata",
        "stat",
        "detail",
        "property",
        "attribute",
    ],
    &["size", "space", "bytes", "large", "big"],
    &[
        "library",
        "package",
        "documentation",
        "api",
        "reference",
        "docs",
    ],
    &["crawl", "scrape", "extract", "spider"],
    &["branch", "checkout", "switch"],
    &["comment", "remark", "review"],
    &["channel", "room", "conversation", "thread", "discussion"],
    &["convert", "transform", "translate", "format"],
    &["sum", "total", "add", "plus"],
    &["echo", "repeat", "mirror"],
    &["reset", "undo", "revert", "unstage"],
    &["status", "state", "health"],
    &["upload", "push", "publish", "deploy"],
    &["hover", "mouse", "drag"],
    &["dialog", "popup", "confirm", "modal"],
    &["console", "javascript", "js", "script", "evaluate", "eval"],
    &["network", "request", "traffic", "http", "xhr"],
    &["pdf", "print"],
    &["resize", "viewport", "dimension"],
    &["crash", "fail", "failure", "error", "broken"],
    &["port", "forward", "tunnel", "proxy"],
    &["cleanup", "clean", "teardown", "tear"],
    &["paragraph", "block", "content"],
    &["column", "property", "field"],
    &["template", "layout", "starter", "preset"],
    &["elevation", "altitude", "height"],
    &["credit", "quota", "usage", "remaining"],
    &["feedback", "report", "rate"],
    &["monitor", "watch", "watcher", "alert", "track"],
    &["news", "headline", "latest"],
    &["compress", "gzip", "zip", "shrink"],
    &["workspace", "team", "organization", "org"],
];

/// The stemmed synonyms of a stemmed word.
fn synonyms(word: &str) -> impl Iterator<Item = &'static String> {
    static GROUPS: LazyLock<Vec<Vec<String>>> = LazyLock::new(|| {
        SYNONYMS
            .iter()
            .map(|group| group.iter().map(|w| STEMMER.stem(w).into_owned()).collect())
            .collect()
    });
    GROUPS
        .iter()
        .filter(move |group| group.iter().any(|w| w == word))
        .flatten()
        .filter(move |w| *w != word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_names_and_text_alike() {
        let got: Vec<String> =
            words("getFileContents HTTPRequest read_text-file, the Files").collect();
        assert_eq!(
            got,
            [
                "get", "file", "content", "http", "request", "read", "text", "file", "file"
            ]
        );
        assert_eq!(words("a of the").count(), 0);
        assert_eq!(words("v2 1").collect::<Vec<_>>(), ["v2", "1"]);
    }

    #[test]
    fn questions_and_requests_to_show_ask() {
        for query in [
            "what changed last week",
            "Which pods are crashing",
            "who's in the team chat",
            "show me config.yaml",
            "list the open PRs",
            "the weather in Paris?",
        ] {
            assert!(asks(query), "{query}");
        }
        for query in [
            "make a new namespace",
            "delete the draft",
            "add 2 and 3",
            "",
        ] {
            assert!(!asks(query), "{query}");
        }
    }

    #[test]
    fn stop_words_are_sorted() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }
}
