//! Cycle finding on the step graph, for validation.

/// Finds dependency cycles with one depth-first walk. `edges[i]` lists the positions
/// step `i` waits for. Each cycle is returned once, in data-flow order (each step is
/// read by the next), starting from its earliest position. Every back edge yields a
/// cycle, so every step on some cycle is reported at least once.
pub(crate) fn find_cycles(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnStack,
        Done,
    }
    let mut mark = vec![Mark::New; edges.len()];
    let mut found: Vec<Vec<usize>> = Vec::new();
    let mut seen: Vec<Vec<usize>> = Vec::new();
    for start in 0..edges.len() {
        if mark[start] != Mark::New {
            continue;
        }
        mark[start] = Mark::OnStack;
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        while let Some(top) = stack.last_mut() {
            let (node, next) = *top;
            let Some(&target) = edges[node].get(next) else {
                mark[node] = Mark::Done;
                stack.pop();
                continue;
            };
            top.1 += 1;
            match mark.get(target).copied() {
                Some(Mark::New) => {
                    mark[target] = Mark::OnStack;
                    stack.push((target, 0));
                }
                Some(Mark::OnStack) => {
                    let from = stack.iter().position(|(n, _)| *n == target).unwrap_or(0);
                    // The stack runs waiter → waited-for; data flows the other way.
                    let mut cycle: Vec<usize> = stack[from..].iter().map(|(n, _)| *n).collect();
                    cycle.reverse();
                    let first = (0..cycle.len()).min_by_key(|k| cycle[*k]).unwrap_or(0);
                    cycle.rotate_left(first);
                    let mut key = cycle.clone();
                    key.sort_unstable();
                    if !seen.contains(&key) {
                        seen.push(key);
                        found.push(cycle);
                    }
                }
                _ => {}
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::find_cycles;

    fn check(edges: &[&[usize]], expected: &[&[usize]]) {
        let edges: Vec<Vec<usize>> = edges.iter().map(|e| e.to_vec()).collect();
        let expected: Vec<Vec<usize>> = expected.iter().map(|e| e.to_vec()).collect();
        assert_eq!(find_cycles(&edges), expected, "{edges:?}");
    }

    #[test]
    fn cycles() {
        check(&[], &[]);
        check(&[&[], &[0], &[0, 1]], &[]);
        check(&[&[1], &[0]], &[&[0, 1]]);
        check(&[&[2], &[0], &[1]], &[&[0, 1, 2]]);
        check(&[&[], &[3], &[1], &[2], &[3]], &[&[1, 2, 3]]);
        check(&[&[1], &[0], &[3], &[2]], &[&[0, 1], &[2, 3]]);
    }
}
