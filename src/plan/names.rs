//! Fuzzy name matching for "did you mean" hints and lenient lookups.

/// Up to three of `known` near enough to `word` to be what was meant: within edit
/// distance (case ignored) of it, or one containing the other (`op`/`operator`), and not
/// much further than the best match.
pub(crate) fn closest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let word = word.to_lowercase();
    let mut scored: Vec<(f64, &str)> = known
        .into_iter()
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

/// Lower-cases a name and drops `_`, `-` and spaces, so `FAIL-FAST` matches `fail_fast`.
pub(crate) fn fold_name(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}
