//! Binding what each step reads: every reference in its arguments (or value), its
//! condition and its items tied to the step, input, item or state slot it names, and
//! its `depends_on`, each checked against the plan's strategy.

use std::collections::HashMap;

use serde_json::Value;

use super::Validator;
use crate::plan::BOARD_INPUT;
use crate::plan::condition::Condition;
use crate::plan::ids::StepId;
use crate::plan::issue::{IssueKind, describe_value};
use crate::plan::names::closest;
use crate::plan::parse::Step;
use crate::plan::refs::{self, PathSeg, RawRef, RawRoot};
use crate::plan::strategy::Strategy;
use crate::plan::template::{Ref, RefSource, Template};
use crate::plan::validated::{Foreach, Limits};

/// Everything a step reads, bound: its arguments (or value), its condition, its items.
pub(super) struct Read {
    pub(super) args: Template,
    pub(super) when: Option<Condition>,
    pub(super) foreach: Option<Foreach>,
}

impl Read {
    pub(super) fn visit_refs(&self, f: &mut dyn FnMut(&Ref)) {
        self.args.visit_refs(&mut |r: &Ref, _| f(r));
        if let Some(when) = &self.when {
            when.visit_refs(f);
        }
        if let Some(foreach) = &self.foreach {
            foreach.items.visit_refs(&mut |r: &Ref, _| f(r));
        }
    }
}

impl Validator<'_> {
    /// Resolves a step-naming word or `steps[N]` to a position, reporting failures.
    pub(super) fn step_index(&mut self, root: &RawRoot, text: &str, at: &str) -> Option<usize> {
        match root {
            RawRoot::Step(name) => match self.first_index.get(name.as_str()) {
                Some(&i) => Some(i),
                None => {
                    let ids = self
                        .plan
                        .steps
                        .iter()
                        .map(|s| s.id.as_str())
                        .chain(["input"]);
                    let closest = closest(name, ids);
                    let kind = IssueKind::UnknownStep {
                        text: text.to_owned(),
                        name: name.clone(),
                        closest,
                    };
                    self.issue(at, kind);
                    None
                }
            },
            RawRoot::Index(n) if *n < self.plan.steps.len() => Some(*n),
            RawRoot::Index(_) => {
                let count = self.plan.steps.len();
                self.issue(
                    at,
                    IssueKind::StepIndexOutOfRange {
                        text: text.to_owned(),
                        count,
                    },
                );
                None
            }
            RawRoot::Input | RawRoot::State(_) | RawRoot::Item | RawRoot::ItemIndex => None,
        }
    }

    /// Checks that step `i` may wait for step `target` under the plan's strategy.
    fn edge_allowed(&mut self, i: usize, target: usize, at: &str) -> bool {
        let steps = &self.plan.steps;
        let (me, them) = (steps[i].id.clone(), steps[target].id.clone());
        let kind = if target == i {
            IssueKind::SelfReference { id: me }
        } else if self.plan.strategy == Strategy::Competitive {
            IssueKind::CompetitiveDependency {
                step: me,
                target: them,
            }
        } else if self.plan.strategy.is_ordered() && target > i {
            let strategy = self.plan.strategy.to_string();
            IssueKind::ForwardReference {
                step: me,
                target: them,
                strategy,
            }
        } else {
            return true;
        };
        self.issue(at, kind);
        false
    }

    /// Binds every reference step `i` reads — in its arguments or value, its condition
    /// and its items — to what it reads, reporting each one that cannot be.
    pub(super) fn reads(
        &mut self,
        i: usize,
        step: &Step,
        slots: &HashMap<String, (usize, bool)>,
        limits: &Limits,
    ) -> Option<Read> {
        let plan = self.plan;
        let known = |name: &str| plan.steps.iter().any(|s| s.id == name);
        let prose = |r: &RawRef| {
            r.text.starts_with("$<") && matches!(&r.root, RawRoot::Step(name) if !known(name))
        };
        let looped = step.foreach.is_some();
        let (written, field) = match &step.value {
            Some(value) => (value, "value"),
            None => (&step.args, "args"),
        };
        let base = format!("steps[{i}].{field}");
        let args = written.literalize(&prose).map_refs(&mut |raw, below| {
            let place = (!looped).then_some("this step has no foreach");
            self.bind(i, raw, &format!("{base}{below}"), slots, place)
        });
        let when = step.when.as_ref().map(|when| {
            when.map_refs(&mut |raw| {
                let place = Some("a step's condition is decided once, before its items");
                self.bind(i, raw, &format!("steps[{i}].when"), slots, place)
            })
        });
        let foreach = step.foreach.as_ref().map(|items| {
            let at = format!("steps[{i}].foreach");
            let bound = items.map_refs(&mut |raw, below| {
                let place = Some("the items are read before there is a current one");
                self.bind(i, raw, &format!("{at}{below}"), slots, place)
            })?;
            let written = match &bound {
                Template::Literal(Value::Array(items)) => Some(items.len()),
                Template::Array(items) => Some(items.len()),
                _ => None,
            };
            match &bound {
                _ if written.is_some_and(|n| n > limits.max_foreach_items) => {
                    let kind = IssueKind::TooManyItems {
                        count: written.unwrap_or_default(),
                        max: limits.max_foreach_items,
                    };
                    self.issue(at, kind);
                    None
                }
                Template::Literal(Value::Array(_)) | Template::Array(_) | Template::Ref(_) => {
                    Some(bound)
                }
                Template::Literal(other) => {
                    let found = describe_value(other);
                    self.issue(at, IssueKind::ForeachNotArray { found });
                    None
                }
                _ => {
                    let found = "an object or text with references inside".to_owned();
                    self.issue(at, IssueKind::ForeachNotArray { found });
                    None
                }
            }
        });
        if step.concurrency.is_some() && !looped {
            self.issue(
                format!("steps[{i}].concurrency"),
                IssueKind::ConcurrencyWithoutForeach,
            );
        }
        let concurrency = step
            .concurrency
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        Some(Read {
            args: args?,
            when: when.map_or(Some(None), |w| w.map(Some))?,
            foreach: foreach
                .map_or(Some(None), |f| f.map(Some))?
                .map(|items| Foreach {
                    items,
                    concurrency,
                    max_items: limits.max_foreach_items,
                }),
        })
    }

    /// What one reference of step `i` reads. `no_item` says why `item` / `index` cannot
    /// be read here, or is `None` where they can.
    fn bind(
        &mut self,
        i: usize,
        raw: &RawRef,
        at: &str,
        slots: &HashMap<String, (usize, bool)>,
        no_item: Option<&str>,
    ) -> Option<Ref> {
        if let Some(place) = no_item
            && raw.path.contains(&PathSeg::ItemIndex)
        {
            let kind = IssueKind::ItemOutsideForeach {
                text: raw.text.clone(),
                place: place.to_owned(),
            };
            self.issue(at, kind);
            return None;
        }
        let source = match &raw.root {
            RawRoot::Input => RefSource::Input,
            RawRoot::Item | RawRoot::ItemIndex => match no_item {
                Some(place) => {
                    let kind = IssueKind::ItemOutsideForeach {
                        text: raw.text.clone(),
                        place: place.to_owned(),
                    };
                    self.issue(at, kind);
                    return None;
                }
                None if matches!(raw.root, RawRoot::Item) => RefSource::Item,
                None => RefSource::Index,
            },
            RawRoot::State(slot) => match slots.get(slot) {
                Some(&(writer, caught)) => {
                    let id = StepId::new(self.plan.steps[writer].id.clone());
                    if caught {
                        RefSource::Error(id)
                    } else {
                        RefSource::Output(id)
                    }
                }
                // Written by an earlier run of the session: read from the plan's inputs.
                None if self.plan.inputs[BOARD_INPUT].get(slot).is_some() => {
                    let mut from_board = raw.clone();
                    let mut path = vec![
                        PathSeg::Key(BOARD_INPUT.to_owned()),
                        PathSeg::Key(slot.clone()),
                    ];
                    path.append(&mut from_board.path);
                    from_board.path = path;
                    return Some(Ref::bind(&from_board, RefSource::Input));
                }
                None => {
                    let closest = closest(slot, slots.keys().map(String::as_str));
                    self.issue(
                        at,
                        IssueKind::UnknownStateSlot {
                            slot: slot.clone(),
                            closest,
                        },
                    );
                    return None;
                }
            },
            root => {
                let target = self.step_index(root, &raw.text, at)?;
                if !self.edge_allowed(i, target, at) {
                    return None;
                }
                RefSource::Output(StepId::new(self.plan.steps[target].id.clone()))
            }
        };
        Some(Ref::bind(raw, source))
    }

    pub(super) fn depends_on(&mut self, i: usize, step: &Step) -> Vec<usize> {
        let mut after = Vec::new();
        for (k, entry) in step.depends_on.iter().enumerate() {
            let at = format!("steps[{i}].depends_on[{k}]");
            let root = match refs::parse_reference(entry, false) {
                Ok(parsed)
                    if parsed.path.is_empty()
                        && matches!(parsed.root, RawRoot::Step(_) | RawRoot::Index(_)) =>
                {
                    parsed.root
                }
                _ => RawRoot::Step(entry.clone()),
            };
            if let Some(target) = self.step_index(&root, entry, &at)
                && self.edge_allowed(i, target, &at)
            {
                after.push(target);
            }
        }
        after
    }
}
