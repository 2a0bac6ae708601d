//! The approvals page: the plans waiting for a user's yes (the token path: a model was
//! answered `needs_approval`), each with the exact steps it asks for; approving runs the
//! plan through the same checkpoint and audit trail as `approve_plan` (approved by
//! `console`), declining records the no and runs nothing. Either way the token is used:
//! a later `approve_plan` with it is told what the console did.

use std::fmt::Write as _;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::Page;
use super::html::{button, esc, json};
use crate::approval::Waiting;
use crate::exec::Quiet;
use crate::identity::Identity;
use crate::policy::{Approver, Grant};
use crate::runner::{PlanRunner, Unchecked};
use crate::state::StoreError;

/// The page's main part (or why the shared store could not list them).
pub fn page(waiting: Result<Vec<Waiting>, StoreError>, csrf: &str) -> String {
    let waiting = match waiting {
        Ok(waiting) => waiting,
        Err(error) => {
            return format!(
                "<h2>Approvals</h2><p class=\"note\">The plans waiting cannot be listed: {}</p>",
                esc(&error.to_string())
            );
        }
    };
    let mut main = format!(
        "<h2>Approvals</h2><p class=\"note\">{} plan(s) waiting for approval, oldest first.</p>",
        waiting.len()
    );
    for plan in &waiting {
        let goal = plan.request.goal.as_deref().unwrap_or("(no goal given)");
        let _ = write!(
            main,
            r#"<section class="approval" data-token="{token}"><h2>{}</h2><p class="note">asked {} s ago by {}</p><table><tr><th>step</th><th>tool</th><th>tier</th><th>arguments</th></tr>"#,
            esc(goal),
            plan.age.as_secs(),
            esc(plan.owner.as_deref().unwrap_or("a caller with no identity")),
            token = esc(&plan.token),
        );
        for step in &plan.request.steps {
            let _ = write!(
                main,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&step.id),
                esc(&step.tool),
                step.tier.as_str(),
                json(&step.args),
            );
        }
        main.push_str("</table>");
        if let Some(inputs) = &plan.request.inputs {
            let _ = write!(main, "<p>inputs</p>{}", json(inputs));
        }
        let token = [("token", plan.token.as_str())];
        main.push_str(&button(
            "/approvals/approve",
            &token,
            "Approve and run",
            csrf,
        ));
        main.push(' ');
        main.push_str(&button("/approvals/decline", &token, "Decline", csrf));
        main.push_str("</section>");
    }
    main
}

/// Approves the plan behind `token` and runs it for `who` (as `grant`, its grant, sees the
/// tools): the run's page, or why it
/// did not run.
pub async fn approve(
    runner: &PlanRunner,
    token: &str,
    who: &Identity,
    grant: &Grant,
    stop: &CancellationToken,
) -> Page {
    let (asked, arguments) = match runner.tokens.settle(token, "approved on the console").await {
        Ok(found) => found,
        Err(why) => return Page::Refused(format!("{why}; nothing ran")),
    };
    let cancel = stop.child_token();
    let checked = match runner.check(arguments, None, grant, &cancel).await {
        Ok(checked) => checked,
        Err(Unchecked::Invalid(issues)) => {
            let why = format!(
                "the plan no longer validates ({} issue(s)); nothing ran",
                issues.len()
            );
            runner
                .tokens
                .note(token, format!("approved on the console, but {why}"))
                .await;
            return Page::Refused(why);
        }
        Err(Unchecked::Unfinished(why)) => {
            runner
                .tokens
                .note(
                    token,
                    format!("approved on the console, but not checked: {why}"),
                )
                .await;
            return Page::Refused(format!("{why}; nothing ran"));
        }
    };
    // What needs approval now must be exactly what the user saw.
    if checked
        .approval
        .as_ref()
        .is_some_and(|now| now.steps != asked.steps || now.inputs != asked.inputs)
    {
        let why = "the tools this plan calls changed since approval was asked for; nothing ran";
        runner
            .tokens
            .note(token, format!("approved on the console, but {why}"))
            .await;
        return Page::Refused(why.into());
    }
    let caller = Some(who.sub.as_str()).filter(|sub| !sub.is_empty());
    let approval = runner.approve(&asked, Approver::Console, caller);
    let record = runner
        .run_by(&checked.plan, Some(approval), who, &Quiet, cancel)
        .await;
    let id = &record.run_id;
    let note = format!("approved on the console, and its plan ran: read planmux://runs/{id}");
    runner.tokens.note(token, note).await;
    Page::SeeOther(format!("/console/runs/{id}"))
}

/// Declines the plan behind `token` for `who`: recorded, nothing runs.
pub async fn decline(runner: &Arc<PlanRunner>, token: &str, who: &Identity) -> Page {
    match runner
        .tokens
        .settle(token, "declined on the console; nothing ran")
        .await
    {
        Ok((asked, _)) => {
            let caller = Some(who.sub.as_str()).filter(|sub| !sub.is_empty());
            runner.decline(&asked, Approver::Console, caller);
            Page::SeeOther("/console/approvals".into())
        }
        Err(why) => Page::Refused(why.to_string()),
    }
}
