//! Bounded text: every message that reaches the model or a log quotes something from
//! outside (a tool's error, a server's stderr, a plan's own text), which can be any size.

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

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clip_cuts_at_characters_and_says_how_much_went() {
        let check = |text: &str, max: usize, expect: &str| assert_eq!(clip(text, max), expect);
        check("short", 10, "short");
        check("exactly", 7, "exactly");
        check("ééééé", 2, "éé… (3 more characters)");
        check(&"x".repeat(5_000_000), 3, "xxx… (4999997 more characters)");
    }
}
