//! What a tool may do and who may call it: each tool's tier (`read`, `write`,
//! `destructive`), the `[policy] deny` list, the tiers a plan needs approval for
//! (`[policy] confirm`), and the one checkpoint every downstream call passes. A call needs
//! an [`Authorized`], and only [`Policy::authorize`] makes one, so a new way of calling a
//! tool cannot skip the checkpoint without failing to compile. A plan step whose tier
//! `confirm` covers is refused there unless the run carries an [`Approval`] naming it:
//! a path that forgets to ask the user fails closed.

use std::collections::BTreeSet;
use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use globset::{GlobMatcher, GlobSet};
use rmcp::model::Tool;
use serde::{Deserialize, Serialize};

/// How much a tool can change: what a host's user would want to be asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Reads, changes nothing.
    Read,
    /// Changes something, not destructively (creates, appends).
    Write,
    /// May destroy or overwrite: the default for a tool that says nothing.
    Destructive,
}

impl Tier {
    /// The tier as the config and the output spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Read => "read",
            Tier::Write => "write",
            Tier::Destructive => "destructive",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Tier {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "read" => Ok(Tier::Read),
            "write" => Ok(Tier::Write),
            "destructive" => Ok(Tier::Destructive),
            other => Err(format!(
                "unknown tier '{other}' (one of: read, write, destructive)"
            )),
        }
    }
}

/// Which tiers a plan needs the user's approval for (`[policy] confirm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Confirm {
    /// `write` and `destructive` (the default).
    #[default]
    Write,
    /// `destructive` only.
    Destructive,
    /// Nothing: plans run without asking.
    None,
}

impl Confirm {
    /// Whether a step of this tier needs approval.
    pub fn covers(self, tier: Tier) -> bool {
        match self {
            Confirm::Write => tier >= Tier::Write,
            Confirm::Destructive => tier == Tier::Destructive,
            Confirm::None => false,
        }
    }
}

impl FromStr for Confirm {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "write" => Ok(Confirm::Write),
            "destructive" => Ok(Confirm::Destructive),
            "none" => Ok(Confirm::None),
            other => Err(format!(
                "unknown value '{other}' (one of: write, destructive, none)"
            )),
        }
    }
}

/// How one server's tools get their tiers: its `tiers` globs first (first match wins),
/// then, when `trust_annotations`, the tool's own hints, else `destructive`.
#[derive(Debug, Clone)]
pub struct TierRules {
    /// Tool-name globs with their tier, in file order.
    pub rules: Vec<(GlobMatcher, Tier)>,
    /// Whether the server's `readOnlyHint` / `destructiveHint` are believed.
    pub trust_annotations: bool,
}

impl Default for TierRules {
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            trust_annotations: true,
        }
    }
}

impl TierRules {
    /// The tier of one of the server's tools.
    pub fn tier(&self, tool: &Tool) -> Tier {
        if let Some((_, tier)) = self
            .rules
            .iter()
            .find(|(glob, _)| glob.is_match(&*tool.name))
        {
            return *tier;
        }
        let hints = tool.annotations.as_ref().filter(|_| self.trust_annotations);
        match hints {
            // The spec's defaults: a tool is not read-only, and is destructive, unless it
            // says otherwise.
            Some(a) if a.read_only_hint == Some(true) => Tier::Read,
            Some(a) if a.destructive_hint == Some(false) => Tier::Write,
            _ => Tier::Destructive,
        }
    }
}

/// Who said yes to a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approver {
    /// The host's user, asked through elicitation.
    Host,
    /// The model relayed a token through `approve_plan`, which the host asked about.
    Token,
    /// The user at `planmux run`'s terminal prompt.
    Terminal,
    /// `planmux run --yes`.
    Flag,
}

impl Approver {
    /// The approver as the audit trail spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Approver::Host => "host",
            Approver::Token => "token",
            Approver::Terminal => "terminal",
            Approver::Flag => "flag",
        }
    }
}

/// A user's yes to some steps of one plan: each step id with the exported tool it calls.
/// Only [`Policy::approve`] makes one (recording it in the audit trail).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    steps: BTreeSet<(String, String)>,
    by: Approver,
    /// The digest of the plan approved, which ties the audit trail's approval to its run.
    plan: String,
}

impl Approval {
    /// Whether step `step` may call `tool` under this approval.
    pub fn covers(&self, step: &str, tool: &str) -> bool {
        self.steps.contains(&(step.to_owned(), tool.to_owned()))
    }

    /// Who approved.
    pub fn by(&self) -> Approver {
        self.by
    }

    /// The digest of the plan approved.
    pub fn plan(&self) -> &str {
        &self.plan
    }
}

/// Which way a call reaches the checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The host called the tool by name (`tools/call`): the host asks its user by name.
    Direct,
    /// A step of a plan.
    Plan {
        /// The run's id (`planmux://runs/{run_id}`).
        run: String,
        /// The step's id.
        step: String,
        /// The user's approval of the plan, if it was asked for and given.
        approval: Option<Arc<Approval>>,
    },
}

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// The tool matches a `[policy] deny` glob.
    #[error("tool '{tool}' is denied by [policy] deny")]
    ByPolicy { tool: String },
    /// `servers.lock` holds the tool back.
    #[error("tool '{tool}' is quarantined: {change}; run `planmux lock` to accept it")]
    Quarantined { tool: String, change: String },
    /// A plan step of a tier `[policy] confirm` covers, without the user's approval.
    #[error(
        "tool '{tool}' ({tier}) needs the user's approval in a plan, and this step was not approved"
    )]
    NotApproved { tool: String, tier: Tier },
}

/// Proof that a call to `tool` passed the checkpoint. Its field is private: only
/// [`Policy::authorize`] makes one.
#[derive(Debug)]
pub struct Authorized {
    tool: String,
}

impl Authorized {
    /// The exported tool name this proof is for.
    pub fn tool(&self) -> &str {
        &self.tool
    }
}

/// The `[policy]` in force and the audit trail.
#[derive(Debug, Default)]
pub struct Policy {
    /// Exported-name globs: never listed, never callable.
    pub deny: Option<GlobSet>,
    /// The tiers a plan step needs approval for.
    pub confirm: Confirm,
    /// Where decisions are also appended as JSON lines (`[proxy] audit_log`), and the
    /// file once opened.
    audit: Option<(PathBuf, Mutex<Option<std::fs::File>>)>,
}

impl Policy {
    /// A policy with `deny` globs and `confirm`, appending decisions to `audit_log` when
    /// given (the file is opened at the first decision; a failure to write is logged).
    pub fn new(deny: Option<GlobSet>, confirm: Confirm, audit_log: Option<PathBuf>) -> Self {
        Self {
            deny,
            confirm,
            audit: audit_log.map(|path| (path, Mutex::new(None))),
        }
    }

    /// A policy with other `deny` globs and `confirm`, appending to the same audit trail.
    pub fn with_rules(&self, deny: Option<GlobSet>, confirm: Confirm) -> Self {
        Self::new(
            deny,
            confirm,
            self.audit.as_ref().map(|(path, _)| path.clone()),
        )
    }

    /// Records the user's yes to `steps` (step id, exported tool, tier) of the plan with
    /// digest `plan`, and returns the approval a run carries to the checkpoint.
    pub fn approve<'a>(
        &self,
        steps: impl IntoIterator<Item = (&'a str, &'a str, Tier)>,
        by: Approver,
        plan: &str,
    ) -> Approval {
        let mut approved = BTreeSet::new();
        for (step, tool, tier) in steps {
            self.answer(step, tool, tier, "approved", by, plan);
            approved.insert((step.to_owned(), tool.to_owned()));
        }
        Approval {
            steps: approved,
            by,
            plan: plan.to_owned(),
        }
    }

    /// Records that the user declined (or cancelled, or never answered) the approval of
    /// `steps` of the plan with digest `plan`: none of them runs.
    pub fn decline<'a>(
        &self,
        steps: impl IntoIterator<Item = (&'a str, &'a str, Tier)>,
        by: Approver,
        plan: &str,
    ) {
        for (step, tool, tier) in steps {
            self.answer(step, tool, tier, "declined", by, plan);
        }
    }

    /// The user's answer (`approved`, `declined`) about one step, in the audit trail.
    fn answer(
        &self,
        step: &str,
        tool: &str,
        tier: Tier,
        decision: &'static str,
        by: Approver,
        plan: &str,
    ) {
        self.record(Audited {
            tool,
            tier: Some(tier),
            path: "approval",
            decision,
            run: None,
            step: Some(step),
            approved_by: Some(by.as_str()),
            plan: Some(plan),
        });
    }

    /// Whether `[policy] deny` matches an exported name.
    pub fn denies(&self, exported: &str) -> bool {
        self.deny.as_ref().is_some_and(|set| set.is_match(exported))
    }

    /// The checkpoint: decides whether `tool` (of `tier`, when known) may be called by
    /// `route`, and records the decision.
    /// `quarantine` says what changed when the lock holds the tool back.
    pub fn authorize(
        &self,
        tool: &str,
        tier: Option<Tier>,
        quarantine: Option<&str>,
        route: &Route,
    ) -> Result<Authorized, Denied> {
        let decision = if self.denies(tool) {
            Err(Denied::ByPolicy {
                tool: tool.to_owned(),
            })
        } else if let Some(change) = quarantine {
            Err(Denied::Quarantined {
                tool: tool.to_owned(),
                change: change.to_owned(),
            })
        } else if let Some(unapproved) = self.unapproved(tool, tier, route) {
            Err(Denied::NotApproved {
                tool: tool.to_owned(),
                tier: unapproved,
            })
        } else {
            Ok(Authorized {
                tool: tool.to_owned(),
            })
        };
        let (path, run, step, approval) = match route {
            Route::Plan {
                run,
                step,
                approval,
            } => (
                "plan",
                Some(run.as_str()),
                Some(step.as_str()),
                approval.as_deref(),
            ),
            Route::Direct => ("direct", None, None, None),
        };
        self.record(Audited {
            tool,
            tier,
            path,
            decision: if decision.is_ok() { "allow" } else { "deny" },
            run,
            step,
            approved_by: approval.map(|a| a.by().as_str()),
            plan: approval.map(Approval::plan),
        });
        decision
    }

    /// The tier of a plan step that needs approval and lacks it (an unknown tier counts
    /// as destructive).
    fn unapproved(&self, tool: &str, tier: Option<Tier>, route: &Route) -> Option<Tier> {
        let Route::Plan { step, approval, .. } = route else {
            return None;
        };
        let tier = tier.unwrap_or(Tier::Destructive);
        let approved = approval.as_ref().is_some_and(|a| a.covers(step, tool));
        (self.confirm.covers(tier) && !approved).then_some(tier)
    }

    /// One decision: a `tracing` event, and a JSON line when an audit log is set. A call
    /// let through is a `debug` event, anything else `info`: a line on stderr per call
    /// cost each proxied call about 35 µs (BENCHMARKS.md §1), and the audit log has every
    /// decision.
    fn record(&self, entry: Audited<'_>) {
        let Audited {
            tool,
            tier,
            path,
            decision,
            run,
            step,
            approved_by,
            plan,
        } = entry;
        let tier = tier.map_or("unknown", Tier::as_str);
        if decision == "allow" {
            tracing::debug!(target: "planmux::audit", tool, tier, path, decision, run, step, approved_by, plan, "authorization");
        } else {
            tracing::info!(target: "planmux::audit", tool, tier, path, decision, run, step, approved_by, plan, "authorization");
        }
        let Some((log, file)) = &self.audit else {
            return;
        };
        let line = serde_json::json!({
            "time_ms": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or_default(),
            "tool": tool, "tier": tier, "path": path, "decision": decision,
            "run": run, "step": step, "approved_by": approved_by, "plan": plan,
        });
        let mut file = file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let written = match &mut *file {
            Some(file) => writeln!(file, "{line}"),
            None => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .and_then(|mut opened| {
                    writeln!(opened, "{line}")?;
                    *file = Some(opened);
                    Ok(())
                }),
        };
        if let Err(error) = written {
            tracing::warn!(%error, path = %log.display(), "cannot append to the audit log");
        }
    }
}

/// One line of the audit trail.
struct Audited<'a> {
    tool: &'a str,
    tier: Option<Tier>,
    /// `direct`, `plan` or `approval`.
    path: &'static str,
    /// `allow`, `deny`, `approved` or `declined`.
    decision: &'static str,
    run: Option<&'a str>,
    step: Option<&'a str>,
    approved_by: Option<&'static str>,
    /// The digest of the plan an approval is for.
    plan: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use globset::Glob;
    use rmcp::model::ToolAnnotations;

    use super::*;

    fn tool(name: &str, hints: Option<ToolAnnotations>) -> Tool {
        let tool = Tool::new(name.to_owned(), "", Arc::new(Default::default()));
        match hints {
            Some(hints) => tool.with_annotations(hints),
            None => tool,
        }
    }

    fn rules(globs: &[(&str, Tier)], trust: bool) -> TierRules {
        TierRules {
            rules: globs
                .iter()
                .filter_map(|(g, t)| Some((Glob::new(g).ok()?.compile_matcher(), *t)))
                .collect(),
            trust_annotations: trust,
        }
    }

    #[test]
    fn tiers_come_from_globs_then_trusted_hints_then_default_to_destructive() {
        let read_only = || Some(ToolAnnotations::new().read_only(true));
        let gentle = || Some(ToolAnnotations::new().destructive(false));
        let check = |rules: &TierRules, tool: Tool, expect: Tier| {
            assert_eq!(rules.tier(&tool), expect, "{}", tool.name);
        };
        let none = rules(&[], true);
        check(&none, tool("get", read_only()), Tier::Read);
        check(&none, tool("append", gentle()), Tier::Write);
        check(&none, tool("anything", None), Tier::Destructive);
        check(
            &none,
            tool("empty_hints", Some(ToolAnnotations::new())),
            Tier::Destructive,
        );
        let globs = rules(
            &[
                ("read_*", Tier::Read),
                ("*", Tier::Write),
                ("rm", Tier::Read),
            ],
            true,
        );
        check(&globs, tool("read_file", None), Tier::Read);
        check(&globs, tool("rm", read_only()), Tier::Write);
        let distrust = rules(&[], false);
        check(&distrust, tool("get", read_only()), Tier::Destructive);
    }

    #[test]
    fn the_checkpoint_refuses_what_deny_matches() {
        let mut deny = globset::GlobSetBuilder::new();
        deny.add(Glob::new("fs__delete_*").unwrap_or_else(|e| panic!("{e}")));
        let policy = Policy::new(deny.build().ok(), Confirm::default(), None);
        let route = Route::Direct;
        assert!(
            policy
                .authorize("fs__read", Some(Tier::Read), None, &route)
                .is_ok()
        );
        assert_eq!(
            policy
                .authorize("fs__delete_all", Some(Tier::Destructive), None, &route)
                .err(),
            Some(Denied::ByPolicy {
                tool: "fs__delete_all".into()
            })
        );
        assert!(matches!(
            policy.authorize("fs__read", None, Some("description changed"), &route),
            Err(Denied::Quarantined { .. })
        ));
        let proof = policy.authorize("fs__read", None, None, &route);
        assert_eq!(
            proof.map(|p| p.tool().to_owned()).ok().as_deref(),
            Some("fs__read")
        );
    }

    #[test]
    fn a_plan_step_needs_an_approval_naming_it_when_confirm_covers_its_tier() {
        let policy = Policy::new(None, Confirm::Write, None);
        let step = |step: &str, approval: Option<&Approval>| Route::Plan {
            run: "r1".into(),
            step: step.into(),
            approval: approval.cloned().map(Arc::new),
        };
        let write = Some(Tier::Write);
        // Fail closed: no approval, or an unknown tier, is a refusal.
        assert!(matches!(
            policy.authorize("fs__write", write, None, &step("w", None)),
            Err(Denied::NotApproved { .. })
        ));
        assert!(matches!(
            policy.authorize("fs__gone", None, None, &step("w", None)),
            Err(Denied::NotApproved {
                tier: Tier::Destructive,
                ..
            })
        ));
        assert!(
            policy
                .authorize("fs__read", Some(Tier::Read), None, &step("r", None))
                .is_ok()
        );
        // Direct calls are the host's to confirm, by name.
        assert!(
            policy
                .authorize("fs__write", write, None, &Route::Direct)
                .is_ok()
        );
        let approval = policy.approve([("w", "fs__write", Tier::Write)], Approver::Token, "d1");
        assert!(
            policy
                .authorize("fs__write", write, None, &step("w", Some(&approval)))
                .is_ok()
        );
        // The approval names a step and its tool: another step, or another tool, is not covered.
        assert!(
            policy
                .authorize("fs__write", write, None, &step("other", Some(&approval)))
                .is_err()
        );
        assert!(
            policy
                .authorize("fs__delete", write, None, &step("w", Some(&approval)))
                .is_err()
        );
        let relaxed = Policy::new(None, Confirm::Destructive, None);
        assert!(
            relaxed
                .authorize("fs__write", write, None, &step("w", None))
                .is_ok()
        );
        assert!(
            relaxed
                .authorize("fs__rm", Some(Tier::Destructive), None, &step("w", None))
                .is_err()
        );
    }
}
