//! What a plan asks back: the `outputs` list, or its named selections bound to steps.

use super::Validator;
use crate::plan::ids::StepId;
use crate::plan::issue::IssueKind;
use crate::plan::refs::{self, PathSeg, RawRef, RawRoot};
use crate::plan::template::{Ref, RefSource, Template};

impl Validator<'_> {
    /// The named selections, and the steps the plan asks for: those the selections read,
    /// or the `outputs` list (`None`: every step).
    pub(super) fn asked(&mut self) -> (Vec<(String, Template)>, Option<Vec<StepId>>) {
        let selections = self.selections();
        if selections.is_empty() {
            return (selections, self.outputs());
        }
        let mut read = Vec::new();
        for (_, template) in &selections {
            template.visit_refs(&mut |r: &Ref, _| {
                if let Some(id) = r.source.step()
                    && !read.contains(id)
                {
                    read.push(id.clone());
                }
            });
        }
        (selections, Some(read))
    }

    /// The named output selections, their references bound to steps.
    fn selections(&mut self) -> Vec<(String, Template)> {
        let mut bound = Vec::new();
        for (name, template) in &self.plan.selections {
            let at = format!("outputs.{name}");
            let mut map = |raw: &RawRef, below: &str| -> Option<Ref> {
                let at = format!("{at}{below}");
                let reads_item = matches!(raw.root, RawRoot::Item | RawRoot::ItemIndex)
                    || raw.path.contains(&PathSeg::ItemIndex);
                let source = match &raw.root {
                    _ if reads_item => {
                        let kind = IssueKind::ItemOutsideForeach {
                            text: raw.text.clone(),
                            place: "outputs are read after the run, when there is none".into(),
                        };
                        self.issue(at, kind);
                        return None;
                    }
                    RawRoot::Input => RefSource::Input,
                    RawRoot::State(slot) => {
                        let kind = IssueKind::BadReference {
                            text: raw.text.clone(),
                            message: format!(
                                "outputs cannot read state slot '{slot}'; name the step that writes it"
                            ),
                        };
                        self.issue(at, kind);
                        return None;
                    }
                    root => {
                        let target = self.step_index(root, &raw.text, &at)?;
                        RefSource::Output(StepId::new(self.plan.steps[target].id.clone()))
                    }
                };
                Some(Ref::bind(raw, source))
            };
            if let Some(template) = template.map_refs(&mut map) {
                bound.push((name.clone(), template));
            }
        }
        bound
    }

    fn outputs(&mut self) -> Option<Vec<StepId>> {
        let listed = self.plan.outputs.as_ref()?;
        let mut ids = Vec::new();
        for (k, name) in listed.iter().enumerate() {
            let root = match refs::parse_reference(name, false) {
                Ok(parsed)
                    if parsed.path.is_empty() && matches!(parsed.root, RawRoot::Index(_)) =>
                {
                    parsed.root
                }
                _ => RawRoot::Step(name.clone()),
            };
            if let Some(i) = self.step_index(&root, name, &format!("outputs[{k}]")) {
                let id = StepId::new(self.plan.steps[i].id.clone());
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        Some(ids)
    }
}
