//! What a tool may do and who may call it: each tool's tier (`read`, `write`,
//! `destructive`), the `[policy] deny` list, the tiers a plan needs approval for
//! (`[policy] confirm`), and the one checkpoint every downstream call passes. A call needs
//! an [`Authorized`], and only [`Policy::authorize`] makes one, so a new way of calling a
//! tool cannot skip the checkpoint without failing to compile. A plan step whose tier
//! `confirm` covers is refused there unless the run carries an [`Approval`] naming it:
//! a path that forgets to ask the user fails closed.
//!
//! Here: the rules in force ([`Policy`], [`Confirm`]) and the checkpoint. Beside them:
//! `tier` (tiers and how a server's tools get theirs), `approval` (the user's yes, made
//! only by [`Policy::approve`]) and `audit` (the trail every decision and answer goes to).

mod access;
mod approval;
mod audit;
mod tier;

use std::path::PathBuf;
use std::str::FromStr;

use globset::GlobSet;

pub use access::{Grant, Rule, Who};
pub use approval::{Approval, Approver};
use audit::AuditTrail;
pub use audit::Decision;
pub use checkpoint::{Authorized, Denied, Route};
pub use tier::{Tier, TierRules};

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

/// The `[policy]` in force and the audit trail.
#[derive(Debug, Default)]
pub struct Policy {
    /// Exported-name globs: never listed, never callable.
    pub deny: Option<GlobSet>,
    /// The tiers a plan step needs approval for.
    pub confirm: Confirm,
    /// Where every decision is recorded.
    audit: AuditTrail,
}

impl Policy {
    /// A policy with `deny` globs and `confirm`, appending decisions to `audit_log` when
    /// given (the file is opened at the first decision; a failure to write is logged).
    pub fn new(deny: Option<GlobSet>, confirm: Confirm, audit_log: Option<PathBuf>) -> Self {
        Self {
            deny,
            confirm,
            audit: AuditTrail::new(audit_log),
        }
    }

    /// A policy with other `deny` globs and `confirm`, appending to the same audit trail.
    pub fn with_rules(&self, deny: Option<GlobSet>, confirm: Confirm) -> Self {
        Self {
            deny,
            confirm,
            audit: self.audit.same(),
        }
    }

    /// The last decisions of the audit trail (at most [`audit::KEPT_DECISIONS`]), newest
    /// first.
    pub fn decisions(&self) -> Vec<Decision> {
        self.audit.recent()
    }

    /// Records the user's yes to `steps` (step id, exported tool, tier) of the plan with
    /// digest `plan`, asked for by `caller` (`None`: no identity), and returns the
    /// approval a run carries to the checkpoint.
    pub fn approve<'a>(
        &self,
        steps: impl IntoIterator<Item = (&'a str, &'a str, Tier)>,
        by: Approver,
        plan: &str,
        caller: Option<&str>,
    ) -> Approval {
        Approval::given(&self.audit, steps, by, plan, caller)
    }

    /// Records that the user declined (or cancelled, or never answered) the approval of
    /// `steps` of the plan with digest `plan`: none of them runs.
    pub fn decline<'a>(
        &self,
        steps: impl IntoIterator<Item = (&'a str, &'a str, Tier)>,
        by: Approver,
        plan: &str,
        caller: Option<&str>,
    ) {
        approval::declined(&self.audit, steps, by, plan, caller);
    }

    /// Records that `caller` (`None`: no identity) accepted the quarantined tool `tool`
    /// on the console: its definition is pinned in `servers.lock` from now on.
    pub fn accepted(&self, tool: &str, tier: Tier, caller: Option<&str>) {
        self.audit.record(audit::Audited {
            tool,
            tier: Some(tier),
            path: "lock",
            decision: "accepted",
            run: None,
            step: None,
            approved_by: Some("console"),
            plan: None,
            caller,
        });
    }

    /// Whether `[policy] deny` matches an exported name.
    pub fn denies(&self, exported: &str) -> bool {
        self.deny.as_ref().is_some_and(|set| set.is_match(exported))
    }
}

/// The checkpoint, in a module of its own: [`Authorized`]'s field is private to it, so
/// nothing else (in `policy` or out) can make a proof; only [`Policy::authorize`] does.
/// It stays in this file because `tests/safety.rs` names `policy.rs` as the one place a
/// proof is made.
mod checkpoint {
    use std::sync::Arc;

    use super::audit::Audited;
    use super::{Approval, Grant, Policy, Tier};

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
        /// The caller's `[[access]]` rule does not allow the tool: to it, there is none.
        #[error("unknown tool '{tool}'")]
        NotGranted { tool: String },
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

    impl Policy {
        /// The checkpoint: decides whether `tool` (of `tier`, when known) may be called by
        /// `route`, and records the decision.
        /// `quarantine` says what changed when the lock holds the tool back.
        pub fn authorize(
            &self,
            tool: &str,
            tier: Option<Tier>,
            quarantine: Option<&str>,
            route: &Route,
            grant: &Grant,
        ) -> Result<Authorized, Denied> {
            let decision = if !grant.allows(tool) {
                Err(Denied::NotGranted {
                    tool: tool.to_owned(),
                })
            } else if self.denies(tool) {
                Err(Denied::ByPolicy {
                    tool: tool.to_owned(),
                })
            } else if let Some(change) = quarantine {
                Err(Denied::Quarantined {
                    tool: tool.to_owned(),
                    change: change.to_owned(),
                })
            } else if let Some(unapproved) = self.unapproved(tool, tier, route, grant) {
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
            self.audit.record(Audited {
                tool,
                tier,
                path,
                decision: if decision.is_ok() { "allow" } else { "deny" },
                run,
                step,
                approved_by: approval.map(|a| a.by().as_str()),
                plan: approval.map(Approval::plan),
                caller: Some(grant.caller()).filter(|c| !c.is_empty()),
            });
            decision
        }

        /// The tier of a plan step that needs approval and lacks it (an unknown tier counts
        /// as destructive).
        fn unapproved(
            &self,
            tool: &str,
            tier: Option<Tier>,
            route: &Route,
            grant: &Grant,
        ) -> Option<Tier> {
            let Route::Plan { step, approval, .. } = route else {
                return None;
            };
            let tier = tier.unwrap_or(Tier::Destructive);
            let approved = approval.as_ref().is_some_and(|a| a.covers(step, tool));
            let confirm = grant.confirm().unwrap_or(self.confirm);
            (confirm.covers(tier) && !approved).then_some(tier)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use globset::Glob;

    use super::*;

    #[test]
    fn the_checkpoint_refuses_what_deny_matches() {
        let mut deny = globset::GlobSetBuilder::new();
        deny.add(Glob::new("fs__delete_*").unwrap_or_else(|e| panic!("{e}")));
        let policy = Policy::new(deny.build().ok(), Confirm::default(), None);
        let route = Route::Direct;
        assert!(
            policy
                .authorize("fs__read", Some(Tier::Read), None, &route, &Grant::all())
                .is_ok()
        );
        assert_eq!(
            policy
                .authorize(
                    "fs__delete_all",
                    Some(Tier::Destructive),
                    None,
                    &route,
                    &Grant::all()
                )
                .err(),
            Some(Denied::ByPolicy {
                tool: "fs__delete_all".into()
            })
        );
        assert!(matches!(
            policy.authorize(
                "fs__read",
                None,
                Some("description changed"),
                &route,
                &Grant::all()
            ),
            Err(Denied::Quarantined { .. })
        ));
        let proof = policy.authorize("fs__read", None, None, &route, &Grant::all());
        assert_eq!(
            proof.map(|p| p.tool().to_owned()).ok().as_deref(),
            Some("fs__read")
        );
    }

    /// A caller's `[[access]]` rule: a tool it does not name is unknown to it, and its own
    /// `confirm` replaces `[policy] confirm`, stricter or looser.
    #[test]
    fn a_callers_rule_limits_its_tools_and_sets_its_confirm() {
        let rule = |tools: &str, confirm| {
            let mut set = globset::GlobSetBuilder::new();
            set.add(Glob::new(tools).expect("a glob"));
            Arc::new(Rule {
                who: vec![Who::Anyone],
                tools: set.build().expect("globs"),
                patterns: vec![tools.into()],
                confirm,
            })
        };
        let policy = Policy::new(None, Confirm::None, None);
        let strict = Grant::of(&[rule("fs__*", Some(Confirm::Write))], None);
        let step = Route::Plan {
            run: "r1".into(),
            step: "w".into(),
            approval: None,
        };
        let write = Some(Tier::Write);
        assert_eq!(
            policy
                .authorize("git__push", write, None, &Route::Direct, &strict)
                .err(),
            Some(Denied::NotGranted {
                tool: "git__push".into()
            })
        );
        assert!(matches!(
            policy.authorize("fs__write", write, None, &step, &strict),
            Err(Denied::NotApproved { .. })
        ));
        let strict_policy = Policy::new(None, Confirm::Write, None);
        let loose = Grant::of(&[rule("*", Some(Confirm::None))], None);
        assert!(
            strict_policy
                .authorize("fs__write", write, None, &step, &loose)
                .is_ok()
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
            policy.authorize("fs__write", write, None, &step("w", None), &Grant::all()),
            Err(Denied::NotApproved { .. })
        ));
        assert!(matches!(
            policy.authorize("fs__gone", None, None, &step("w", None), &Grant::all()),
            Err(Denied::NotApproved {
                tier: Tier::Destructive,
                ..
            })
        ));
        assert!(
            policy
                .authorize(
                    "fs__read",
                    Some(Tier::Read),
                    None,
                    &step("r", None),
                    &Grant::all()
                )
                .is_ok()
        );
        // Direct calls are the host's to confirm, by name.
        assert!(
            policy
                .authorize("fs__write", write, None, &Route::Direct, &Grant::all())
                .is_ok()
        );
        let approval = policy.approve(
            [("w", "fs__write", Tier::Write)],
            Approver::Token,
            "d1",
            None,
        );
        assert!(
            policy
                .authorize(
                    "fs__write",
                    write,
                    None,
                    &step("w", Some(&approval)),
                    &Grant::all()
                )
                .is_ok()
        );
        // The approval names a step and its tool: another step, or another tool, is not covered.
        assert!(
            policy
                .authorize(
                    "fs__write",
                    write,
                    None,
                    &step("other", Some(&approval)),
                    &Grant::all()
                )
                .is_err()
        );
        assert!(
            policy
                .authorize(
                    "fs__delete",
                    write,
                    None,
                    &step("w", Some(&approval)),
                    &Grant::all()
                )
                .is_err()
        );
        let relaxed = Policy::new(None, Confirm::Destructive, None);
        assert!(
            relaxed
                .authorize("fs__write", write, None, &step("w", None), &Grant::all())
                .is_ok()
        );
        assert!(
            relaxed
                .authorize(
                    "fs__rm",
                    Some(Tier::Destructive),
                    None,
                    &step("w", None),
                    &Grant::all()
                )
                .is_err()
        );
    }
}
