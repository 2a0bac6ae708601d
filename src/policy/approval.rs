//! A user's answer to a plan's approval, as the checkpoint reads it: an [`Approval`] names
//! the steps approved with their tools, and only
//! [`Policy::approve`](crate::policy::Policy::approve) makes one, recording it in the
//! audit trail (as `Policy::decline` records a no). What to ask and how is
//! [`crate::approval`]'s.

use std::collections::BTreeSet;

use super::audit::{AuditTrail, Audited};
use super::tier::Tier;

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
    /// A user of the console, on its approvals page.
    Console,
}

impl Approver {
    /// The approver as the audit trail spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Approver::Host => "host",
            Approver::Token => "token",
            Approver::Terminal => "terminal",
            Approver::Flag => "flag",
            Approver::Console => "console",
        }
    }
}

/// A user's yes to some steps of one plan: each step id with the exported tool it calls.
/// Only [`Policy::approve`](crate::policy::Policy::approve) makes one (recording it in the
/// audit trail).
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

impl Approval {
    /// The user's yes to `steps` (step id, exported tool, tier) of the plan with digest
    /// `plan`, each recorded in `audit`: an approval is made here only, behind
    /// [`Policy::approve`](crate::policy::Policy::approve), so none exists without its
    /// record.
    pub(super) fn given<'a>(
        audit: &AuditTrail,
        steps: impl IntoIterator<Item = (&'a str, &'a str, Tier)>,
        by: Approver,
        plan: &str,
        caller: Option<&str>,
    ) -> Approval {
        let mut approved = BTreeSet::new();
        for (step, tool, tier) in steps {
            let answered = Answered {
                decision: "approved",
                by,
                plan,
                caller,
            };
            answer(audit, step, tool, tier, &answered);
            approved.insert((step.to_owned(), tool.to_owned()));
        }
        Approval {
            steps: approved,
            by,
            plan: plan.to_owned(),
        }
    }
}

/// The user's no to `steps` of the plan with digest `plan`, each recorded in `audit`.
pub(super) fn declined<'a>(
    audit: &AuditTrail,
    steps: impl IntoIterator<Item = (&'a str, &'a str, Tier)>,
    by: Approver,
    plan: &str,
    caller: Option<&str>,
) {
    let answered = Answered {
        decision: "declined",
        by,
        plan,
        caller,
    };
    for (step, tool, tier) in steps {
        answer(audit, step, tool, tier, &answered);
    }
}

/// A user's answer to an approval: `approved` or `declined`, by whom, for which plan,
/// asked for by which caller.
struct Answered<'a> {
    decision: &'static str,
    by: Approver,
    plan: &'a str,
    caller: Option<&'a str>,
}

/// The user's answer about one step, in the audit trail.
fn answer(audit: &AuditTrail, step: &str, tool: &str, tier: Tier, answered: &Answered<'_>) {
    audit.record(Audited {
        tool,
        tier: Some(tier),
        path: "approval",
        decision: answered.decision,
        run: None,
        step: Some(step),
        approved_by: Some(answered.by.as_str()),
        plan: Some(answered.plan),
        caller: answered.caller,
    });
}
