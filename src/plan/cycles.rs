//! Cycle finding on the step graph, for validation.

/// Finds dependency cycles: one per strongly connected component, so a plan where every
/// step reads every other reports one cycle, not tens of thousands. `edges[i]` lists the
/// positions step `i` waits for. Each cycle is the shortest one through its component's
/// earliest step, in data-flow order (each step is read by the next), starting there.
/// Linear in the graph's size, plus a breadth-first walk per component.
pub fn find_cycles(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut cycles: Vec<Vec<usize>> = components(edges)
        .into_iter()
        .filter(|c| c.len() > 1)
        .filter_map(|component| shortest_cycle(edges, &component))
        .collect();
    cycles.sort_by_key(|c| c.first().copied());
    cycles
}

/// Tarjan's strongly connected components, without recursion.
fn components(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const NONE: usize = usize::MAX;
    let n = edges.len();
    let (mut index, mut low) = (vec![NONE; n], vec![0; n]);
    let mut on_stack = vec![false; n];
    let (mut stack, mut found) = (Vec::new(), Vec::new());
    let mut next = 0;
    for start in 0..n {
        if index[start] != NONE {
            continue;
        }
        let mut walk: Vec<(usize, usize)> = vec![(start, 0)];
        index[start] = next;
        low[start] = next;
        next += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(&mut (node, ref mut at)) = walk.last_mut() {
            if let Some(&target) = edges[node].get(*at) {
                *at += 1;
                if target >= n {
                    continue;
                }
                if index[target] == NONE {
                    index[target] = next;
                    low[target] = next;
                    next += 1;
                    stack.push(target);
                    on_stack[target] = true;
                    walk.push((target, 0));
                } else if on_stack[target] {
                    low[node] = low[node].min(index[target]);
                }
                continue;
            }
            walk.pop();
            if let Some(&(parent, _)) = walk.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == index[node] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                found.push(component);
            }
        }
    }
    found
}

/// The shortest cycle through the component's earliest step, in data-flow order.
fn shortest_cycle(edges: &[Vec<usize>], component: &[usize]) -> Option<Vec<usize>> {
    let start = *component.iter().min()?;
    let inside = |i: usize| component.contains(&i);
    // Data flows from a waited-for step to its waiter: walk `edges` backwards.
    let mut readers: std::collections::HashMap<usize, Vec<usize>> = Default::default();
    for &waiter in component {
        for &target in &edges[waiter] {
            if inside(target) {
                readers.entry(target).or_default().push(waiter);
            }
        }
    }
    let mut came_from: std::collections::HashMap<usize, usize> = Default::default();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        let mut next: Vec<usize> = readers.get(&node).cloned().unwrap_or_default();
        next.sort_unstable();
        for reader in next {
            if reader == start {
                let mut path = vec![node];
                while let Some(&before) = came_from.get(path.last()?) {
                    path.push(before);
                }
                path.reverse();
                return Some(path);
            }
            if reader != start && !came_from.contains_key(&reader) {
                came_from.insert(reader, node);
                queue.push_back(reader);
            }
        }
    }
    None
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
        // Every step reads every other: one component, one (shortest) cycle.
        let all: Vec<Vec<usize>> = (0..256)
            .map(|i| (0..256).filter(|j| *j != i).collect())
            .collect();
        assert_eq!(find_cycles(&all), vec![vec![0, 1]]);
        // A long ring is reported whole.
        let ring: Vec<Vec<usize>> = (0..100).map(|i| vec![(i + 99) % 100]).collect();
        assert_eq!(find_cycles(&ring), vec![(0..100).collect::<Vec<_>>()]);
    }
}
