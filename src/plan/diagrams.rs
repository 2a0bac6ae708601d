//! A validated plan's step graph as pictures: a Mermaid flowchart and Graphviz DOT, data
//! flowing along the arrows and the steps asked for drawn bold.

use std::fmt::Write as _;

use super::validated::{DependencyKind, ValidatedPlan};

/// Text safe inside a double-quoted Mermaid label or DOT string.
fn label(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "'")
}

/// The plan as a Mermaid flowchart (data flows down the arrows; output steps are bold).
pub fn mermaid(plan: &ValidatedPlan) -> String {
    let mut out = String::from("flowchart TD\n");
    let node = |i: usize| format!("s{i}");
    for step in plan.steps() {
        let _ = writeln!(
            out,
            "    {}[\"{}<br/>{}\"]",
            node(step.index),
            label(step.id.as_str()),
            label(step.shown_tool())
        );
    }
    for step in plan.steps() {
        for dep in &step.depends_on {
            let Some(from) = plan.step(&dep.step) else {
                continue;
            };
            let arrow = match dep.kind {
                DependencyKind::Output => "-->",
                DependencyKind::Error => "-.->|on error|",
                DependencyKind::After => "-->|after|",
                DependencyKind::Sequence => "-.->",
            };
            let _ = writeln!(out, "    {} {arrow} {}", node(from.index), node(step.index));
        }
    }
    let outputs: Vec<String> = plan
        .outputs()
        .iter()
        .filter_map(|id| plan.step(id))
        .map(|s| node(s.index))
        .collect();
    if !outputs.is_empty() {
        out.push_str("    classDef output stroke-width:3px\n");
        let _ = writeln!(out, "    class {} output", outputs.join(","));
    }
    out
}

/// The plan as a Graphviz digraph (data flows along the edges; output steps are bold).
pub fn dot(plan: &ValidatedPlan) -> String {
    let mut out = String::from("digraph plan {\n    rankdir=TB;\n    node [shape=box];\n");
    let outputs = plan.outputs();
    for step in plan.steps() {
        let bold = if outputs.contains(&step.id) {
            ", style=bold"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "    \"{}\" [label=\"{}\\n{}\"{bold}];",
            label(step.id.as_str()),
            label(step.id.as_str()),
            label(step.shown_tool())
        );
    }
    for step in plan.steps() {
        for dep in &step.depends_on {
            let style = match dep.kind {
                DependencyKind::Output => "",
                DependencyKind::Error => " [style=dashed, label=\"on error\"]",
                DependencyKind::After => " [label=\"after\"]",
                DependencyKind::Sequence => " [style=dotted]",
            };
            let _ = writeln!(
                out,
                "    \"{}\" -> \"{}\"{style};",
                label(dep.step.as_str()),
                label(step.id.as_str())
            );
        }
    }
    out.push_str("}\n");
    out
}
