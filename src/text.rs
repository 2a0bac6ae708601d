//! Bounded text: every message that reaches the model or a log quotes something from
//! outside (a tool's error, a server's stderr, a plan's own text), which can be any size.
//! And the scan for a fixed text in a message, on a call's path.

/// Whether the fixed bytes `$needle` occur in `$haystack`, with a searcher built once per
/// call site (`memchr::memmem::find` builds one per search, several per routed call).
macro_rules! contains {
    ($haystack:expr, $needle:expr) => {{
        static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new($needle));
        FINDER.find($haystack).is_some()
    }};
}
pub(crate) use contains;

/// A message (an error, a reason, a warning) cut to `max` characters, saying how much
/// went: messages quote what tools and servers said, which can be anything.
pub fn clip(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => text.into(),
        Some((end, _)) => {
            let more = text[end..].chars().count();
            format!("{}… ({more} more characters)", &text[..end]).into()
        }
    }
}

/// A URL fit to print: its user info (`user:password@`) and its query (`?key=…`), where
/// credentials live, replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, _)) => format!("{path}?***"),
        None => tail.to_owned(),
    };
    format!("{scheme}{host}{tail}")
}

/// `text` with every `http://` or `https://` URL in it passed through [`redact_url`]:
/// for messages of libraries that quote the URL they failed on.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = ["http://", "https://"]
        .iter()
        .filter_map(|scheme| rest.find(scheme))
        .min()
    {
        out.push_str(&rest[..at]);
        let url = &rest[at..];
        let end = url
            .find(|c: char| {
                c.is_whitespace() || matches!(c, ')' | '(' | ',' | '"' | '\'' | '<' | '>')
            })
            .unwrap_or(url.len());
        out.push_str(&redact_url(&url[..end]));
        rest = &url[end..];
    }
    out.push_str(rest);
    out
}

/// `n` and the noun, plural unless `n` is 1: "1 step", "3 steps".
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::{clip, redact_url, redact_urls};

    #[test]
    fn urls_inside_messages_lose_their_credentials() {
        assert_eq!(
            redact_urls(
                "error sending request for url (http://h:9/mcp?key=s), when x; see https://u:p@h2/"
            ),
            "error sending request for url (http://h:9/mcp?***), when x; see https://***@h2/"
        );
        assert_eq!(redact_urls("no url here"), "no url here");
    }

    #[test]
    fn urls_lose_their_credentials() {
        let check = |url: &str, expect: &str| assert_eq!(redact_url(url), expect, "{url}");
        check("http://127.0.0.1:3001/mcp", "http://127.0.0.1:3001/mcp");
        check("https://u:p4ss@h.example/mcp", "https://***@h.example/mcp");
        check("https://h/mcp?key=s3cret&x=1", "https://h/mcp?***");
        check("https://a:b@h?key=1#frag", "https://***@h?***");
        check("https://h/p#frag", "https://h/p#frag");
    }

    #[test]
    fn clip_cuts_at_characters_and_says_how_much_went() {
        let check = |text: &str, max: usize, expect: &str| assert_eq!(clip(text, max), expect);
        check("short", 10, "short");
        check("exactly", 7, "exactly");
        check("ééééé", 2, "éé… (3 more characters)");
        check(&"x".repeat(5_000_000), 3, "xxx… (4999997 more characters)");
    }
}
