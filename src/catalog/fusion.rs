//! Reciprocal-rank fusion: several rankings of the catalog (one per phrasing of a need
//! given to `search_tools`) made one, so that a tool near the top of several comes first
//! whichever phrasing found it.

use std::collections::HashMap;

/// The constant of reciprocal-rank fusion: how much a first place outweighs a tenth. 60 is
/// the value of the method's paper (Cormack, Clarke and Büttcher, 2009), not one fitted to
/// planmux's benchmark queries.
pub const RRF_K: f64 = 60.0;

/// Rankings (positions in the catalog, best first) fused by reciprocal rank, best first;
/// ties go to the better single place, then to catalog order.
pub fn fuse(rankings: &[Vec<usize>]) -> Vec<usize> {
    let mut scores: HashMap<usize, (f64, usize)> = HashMap::new();
    for ranking in rankings {
        for (rank, &tool) in ranking.iter().enumerate() {
            let entry = scores.entry(tool).or_insert((0.0, usize::MAX));
            entry.0 += 1.0 / (RRF_K + rank as f64 + 1.0);
            entry.1 = entry.1.min(rank);
        }
    }
    let mut fused: Vec<(usize, (f64, usize))> = scores.into_iter().collect();
    fused.sort_by(|(i, (a, best_a)), (j, (b, best_b))| {
        b.total_cmp(a).then(best_a.cmp(best_b)).then(i.cmp(j))
    });
    fused.into_iter().map(|(tool, _)| tool).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_high_in_several_rankings_comes_first() {
        let check = |rankings: &[&[usize]], expected: &[usize]| {
            let rankings: Vec<Vec<usize>> = rankings.iter().map(|r| r.to_vec()).collect();
            assert_eq!(fuse(&rankings), expected, "{rankings:?}");
        };
        // One ranking is itself.
        check(&[&[3, 1, 2]], &[3, 1, 2]);
        // Second in both beats first in one.
        check(&[&[7, 5], &[4, 5], &[9, 5]], &[5, 4, 7, 9]);
        // A tie goes to the better single place, then to catalog order.
        check(&[&[1, 2], &[2, 1]], &[1, 2]);
        check(&[&[], &[8]], &[8]);
        check(&[], &[]);
    }
}
