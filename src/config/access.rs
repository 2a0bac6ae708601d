//! `[[access]]`: each rule read into a [`Rule`] of the policy (`policy/access.rs`), its
//! callers and tool globs checked.

use std::sync::Arc;

use super::read::{Refused, Section};
use super::validate::Cx;
use super::wire;
use crate::policy::{Rule, Who};

impl Cx<'_> {
    /// Rule number `n` (from 1) of `[[access]]`; `None` once a problem is reported.
    pub(super) fn access(&self, n: usize, section: Section<wire::Access>) -> Option<Arc<Rule>> {
        let s = format!("[[access]] #{n}");
        let w = match section.0 {
            Ok(w) => w,
            Err(refused) => {
                for Refused { key, message } in refused {
                    match key {
                        Some(key) => self.key_error(&s, &key, message),
                        None => self.section_error(&s, message),
                    }
                }
                return None;
            }
        };
        let who: Vec<Who> = (self.strings(&s, "who", Some(&w.who)).iter())
            .filter_map(|who| {
                Who::parse(who)
                    .map_err(|why| self.key_error(&s, "who", why))
                    .ok()
            })
            .collect();
        if w.who.0.is_empty() {
            self.key_error(
                &s,
                "who",
                "names no caller: list sub:ID, group:NAME, email:ADDR or \"*\"",
            );
        }
        let patterns = self.strings(&s, "tools", Some(&w.tools));
        let tools = self.globs(&s, "tools", Some(&w.tools))?;
        (who.len() == w.who.0.len() && !who.is_empty()).then(|| {
            Arc::new(Rule {
                who,
                tools,
                patterns,
                confirm: w.confirm.map(|confirm| confirm.0),
            })
        })
    }
}
