//! The schedule a validated plan would follow, for reading: dependency levels, the
//! critical path, what each step waits for; as data (a lazy plan's answer) and as text
//! (`planmux validate`). `diagrams` draws the same graph.
//!
//! Levels are for reading only: the executor (`exec::scheduler`) starts each step as
//! soon as what it waits for has finished, not level by level.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use super::ids::StepId;
use super::strategy::Strategy;
use super::validated::{DependencyKind, StepKind, ValidatedPlan};

/// The shape of a plan's run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Each step's level (0: waits for nothing), in plan order.
    level: Vec<usize>,
    /// Each step's waits, as positions, in plan order.
    waits: Vec<Vec<usize>>,
    ids: Vec<StepId>,
}

/// Computes the schedule. Validation guarantees the graph has no cycle; should one
/// slip through, the steps on it are put on the last level rather than looping.
pub fn schedule(plan: &ValidatedPlan) -> Schedule {
    let steps = plan.steps();
    let ids: Vec<StepId> = steps.iter().map(|s| s.id.clone()).collect();
    let index: HashMap<&StepId, usize> = ids.iter().enumerate().map(|(i, id)| (id, i)).collect();
    let waits: Vec<Vec<usize>> = steps
        .iter()
        .map(|s| {
            s.waits_for()
                .filter_map(|id| index.get(id).copied())
                .collect()
        })
        .collect();
    let mut level: Vec<Option<usize>> = vec![None; steps.len()];
    // Relax until stable: at most one pass per step on an acyclic graph.
    for _ in 0..=steps.len() {
        let mut changed = false;
        for i in 0..steps.len() {
            let known: Option<Vec<usize>> = waits[i].iter().map(|w| level[*w]).collect();
            let new = known.map(|ls| ls.iter().map(|l| l + 1).max().unwrap_or(0));
            if new.is_some() && new != level[i] {
                level[i] = new;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let last = level.iter().flatten().max().map_or(0, |l| l + 1);
    let level = level.into_iter().map(|l| l.unwrap_or(last)).collect();
    Schedule { level, waits, ids }
}

impl Schedule {
    /// Steps grouped by level, each group in plan order.
    pub fn levels(&self) -> Vec<Vec<StepId>> {
        let depth = self.level.iter().max().map_or(0, |l| l + 1);
        let mut levels = vec![Vec::new(); depth];
        for (i, l) in self.level.iter().enumerate() {
            levels[*l].push(self.ids[i].clone());
        }
        levels
    }

    /// The steps `step` waits for.
    pub fn waits_for(&self, step: &StepId) -> Vec<StepId> {
        self.position(step)
            .map(|i| self.waits[i].iter().map(|w| self.ids[*w].clone()).collect())
            .unwrap_or_default()
    }

    fn position(&self, step: &StepId) -> Option<usize> {
        self.ids.iter().position(|id| id == step)
    }

    /// The longest chain of steps that must run one after another, by step count.
    pub fn critical_path(&self) -> Vec<StepId> {
        self.critical_path_weighted(&|_| 1).0
    }

    /// The chain with the largest total of `duration` (e.g. measured milliseconds),
    /// and that total. A plan cannot finish faster than this.
    pub fn critical_path_weighted(&self, duration: &dyn Fn(&StepId) -> u64) -> (Vec<StepId>, u64) {
        let mut order: Vec<usize> = (0..self.ids.len()).collect();
        order.sort_by_key(|i| self.level[*i]);
        let mut finish = vec![0u64; self.ids.len()];
        let mut via: Vec<Option<usize>> = vec![None; self.ids.len()];
        for &i in &order {
            let before = self.waits[i]
                .iter()
                .filter(|w| self.level[**w] < self.level[i])
                .max_by_key(|w| (finish[**w], std::cmp::Reverse(**w)));
            via[i] = before.copied();
            finish[i] = before.map_or(0, |w| finish[*w]) + duration(&self.ids[i]);
        }
        let Some(end) = (0..self.ids.len()).max_by_key(|i| (finish[*i], std::cmp::Reverse(*i)))
        else {
            return (Vec::new(), 0);
        };
        let mut path = vec![end];
        while let Some(prev) = path.last().and_then(|p| via[*p]) {
            path.push(prev);
        }
        path.reverse();
        (
            path.into_iter().map(|i| self.ids[i].clone()).collect(),
            finish[end],
        )
    }

    /// The schedule as data: what a lazy plan answers and `planmux validate --json`
    /// prints.
    pub fn to_json(&self, plan: &ValidatedPlan) -> Value {
        let ids = |list: &[StepId]| -> Vec<Value> {
            list.iter()
                .map(|id| Value::String(id.to_string()))
                .collect()
        };
        let levels: Vec<Value> = self.levels().iter().map(|l| Value::Array(ids(l))).collect();
        let mut steps = Map::new();
        for step in plan.steps() {
            let mut entry = Map::new();
            match step.kind {
                StepKind::Call => {
                    entry.insert("tool".into(), json!(step.exported));
                    entry.insert("tier".into(), json!(step.tier));
                }
                StepKind::Value => {
                    entry.insert("value".into(), json!(true));
                }
            }
            entry.insert(
                "waits_for".into(),
                Value::Array(ids(&self.waits_for(&step.id))),
            );
            if let Some(when) = &step.when {
                entry.insert("when".into(), json!(when.to_string()));
            }
            if let Some(foreach) = &step.foreach {
                entry.insert("foreach".into(), json!(foreach.describe()));
            }
            steps.insert(step.id.to_string(), Value::Object(entry));
        }
        json!({
            "strategy": plan.strategy().as_str(),
            "on_error": plan.on_error().as_str(),
            "levels": levels,
            "critical_path": ids(&self.critical_path()),
            "steps": steps,
            "outputs": ids(&plan.outputs()),
        })
    }

    /// A plain-text rendering for `planmux validate`.
    pub fn render_text(&self, plan: &ValidatedPlan) -> String {
        let mut out = String::new();
        if let Some(goal) = plan.goal() {
            let _ = writeln!(out, "goal: {goal}");
        }
        let levels = self.levels();
        let _ = writeln!(
            out,
            "{}, {}, strategy {}, on_error {}",
            crate::text::count(self.ids.len(), "step"),
            crate::text::count(levels.len(), "level"),
            plan.strategy(),
            plan.on_error()
        );
        let width = self
            .ids
            .iter()
            .map(|id| id.as_str().len())
            .max()
            .unwrap_or(0);
        let tool_width = plan
            .steps()
            .iter()
            .map(|s| s.shown_tool().len())
            .max()
            .unwrap_or(0);
        for (l, group) in levels.iter().enumerate() {
            let _ = writeln!(out, "level {l}:");
            for id in group {
                let Some(step) = plan.step(id) else { continue };
                let tool = step.shown_tool();
                let _ = write!(out, "  {:width$}  {tool}", id.as_str());
                let pad = tool_width.saturating_sub(tool.len());
                let waits: Vec<String> = step
                    .depends_on
                    .iter()
                    .map(|d| match d.kind {
                        DependencyKind::Error => format!("{} (its error)", d.step),
                        _ => d.step.to_string(),
                    })
                    .collect();
                if !waits.is_empty() {
                    let _ = write!(out, "{:pad$}  waits for {}", "", waits.join(", "));
                }
                if let Some(when) = &step.when {
                    let _ = write!(out, "  when {when}");
                }
                if let Some(foreach) = &step.foreach {
                    let _ = write!(out, "  foreach {}", foreach.describe());
                }
                out.push('\n');
            }
        }
        let path = self.critical_path();
        let names: Vec<&str> = path.iter().map(StepId::as_str).collect();
        let _ = writeln!(
            out,
            "critical path ({}): {}",
            crate::text::count(path.len(), "step"),
            names.join(" → ")
        );
        if plan.strategy() == Strategy::Competitive {
            out.push_str("competitive: all steps start at once; the first success wins\n");
        }
        let outputs: Vec<String> = plan.outputs().iter().map(ToString::to_string).collect();
        let _ = writeln!(out, "outputs: {}", outputs.join(", "));
        for warning in plan.warnings() {
            let _ = writeln!(out, "warning: {warning}");
        }
        out
    }
}
