//! Fuzzy name matching for "did you mean" hints and lenient lookups.

use std::cell::Cell;

/// Words and candidates longer than this are not compared: no name worth suggesting is
/// that long, and a comparison costs the product of the two lengths.
pub const MAX_HINT_CHARS: usize = 64;
/// Character pairs one validation may spend on hints (a comparison of two 64-character
/// names costs 4,096): a few milliseconds. Past it, problems are still reported, without
/// "did you mean".
pub const HINT_BUDGET: usize = 4_000_000;

thread_local! {
    /// What is left of [`HINT_BUDGET`] on this thread (validation runs on one thread).
    static HINT_LEFT: Cell<usize> = const { Cell::new(HINT_BUDGET) };
}

/// Restores the whole hint budget: called when a validation starts.
pub(crate) fn reset_hint_budget() {
    HINT_LEFT.with(|left| left.set(HINT_BUDGET));
}

/// Takes `cost` from this thread's hint budget; false when it cannot.
fn spend(cost: usize) -> bool {
    HINT_LEFT.with(|left| match left.get().checked_sub(cost) {
        Some(rest) => {
            left.set(rest);
            true
        }
        None => false,
    })
}

/// Up to three of `known` near enough to `word` to be what was meant: within edit
/// distance (case ignored) of it, or one containing the other (`op`/`operator`), and not
/// much further than the best match. Bounded: see [`MAX_HINT_CHARS`] and [`HINT_BUDGET`].
pub(crate) fn closest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let length = word.chars().count();
    if length > MAX_HINT_CHARS {
        return Vec::new();
    }
    let word = word.to_lowercase();
    let mut scored: Vec<(f64, &str)> = known
        .into_iter()
        .filter(|k| k.len() <= MAX_HINT_CHARS * 4 && k.chars().count() <= MAX_HINT_CHARS)
        .take_while(|k| spend(length.max(1) * k.chars().count().max(1)))
        .map(|k| {
            let lower = k.to_lowercase();
            let mut score = strsim::normalized_damerau_levenshtein(&word, &lower);
            let (short, long) = if word.len() < lower.len() {
                (&word, &lower)
            } else {
                (&lower, &word)
            };
            if short.len() >= 2 && long.contains(short.as_str()) {
                score = score.max(0.8);
            }
            (score, k)
        })
        .filter(|(score, _)| *score >= 0.6)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored.dedup_by(|a, b| a.1 == b.1);
    let best = scored.first().map_or(0.0, |(score, _)| *score);
    scored
        .into_iter()
        .filter(|(score, _)| *score >= best - 0.15)
        .take(3)
        .map(|(_, k)| k.to_owned())
        .collect()
}

/// Lower-cases a name and drops `_`, `-` and spaces, so `FAIL-FAST` matches `fail_fast`
/// (strategies, `on_error`, modes: words of the plan language, never tool names).
pub(crate) fn fold_name(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// A tool or server name as resolution compares it: lower-cased, `-` read as `_`, so
/// `GIT__GIT-LOG` is `git__git_log`; separators are kept (`git__gitlog` stays another
/// name, reported with a hint rather than silently taken for it).
pub(crate) fn fold_tool_name(text: &str) -> String {
    text.chars()
        .map(|c| if c == '-' { '_' } else { c })
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_stop_when_their_budget_is_spent() {
        reset_hint_budget();
        let ids: Vec<String> = (0..100).map(|i| format!("step_{i:03}")).collect();
        assert_eq!(closest("step_01", ids.iter().map(String::as_str)).len(), 3);
        // A long word is not compared at all.
        assert!(closest(&"x".repeat(5_000_000), ids.iter().map(String::as_str)).is_empty());
        // 10,000 dangling references against 256 ids: the budget runs out, then no hints.
        let mut hinted = 0;
        for i in 0..10_000 {
            hinted += usize::from(
                !closest(&format!("step_{i}x"), ids.iter().map(String::as_str)).is_empty(),
            );
        }
        assert!(hinted < 10_000 && hinted > 10, "{hinted}");
        assert!(HINT_LEFT.with(Cell::get) < 64 * 64);
        reset_hint_budget();
        assert_eq!(closest("step_01", ids.iter().map(String::as_str)).len(), 3);
    }
}
