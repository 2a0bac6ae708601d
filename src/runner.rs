//! Plans run against the downstream servers: where the executor meets the downstreams.
//! It validates against the live catalog, works out what needs the user's approval, runs
//! through the downstreams (the executor's [`Invoker`](crate::exec::Invoker)) with that
//! approval, and keeps the records. Used by the MCP server and by `planmux run`.
//!
//! The executor and the downstreams know nothing of each other; this module composes
//! them, so neither depends on the other.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::approval::{Request, Tokens};
use crate::config::{Config, PipelineConfig};
use crate::downstream::{Caller, DownstreamError, Downstreams};
use crate::exec::{Boards, Observer, RunRecord, RunStore, Settings, run};
use crate::identity::Owner;
use crate::pipelines::{PipelineState, Pipelines};
use crate::plan::{IssueKind, Limits, PlanIssue, ValidatedPlan, prepare, prepare_on, schedule};
use crate::policy::{Approval, Approver, Confirm, Grant};
use crate::state::Shared;
use crate::task_set::TaskSet;
use crate::traces::{self, FutureExt as _};

/// How many plans running as tasks are kept (each observable until its time-to-live;
/// beyond that the oldest is stopped and forgotten).
const KEPT_PLAN_TASKS: usize = 64;
/// How long a plan task stays observable after the longest a plan may run.
const PLAN_TASK_KEPT_AFTER: std::time::Duration = std::time::Duration::from_secs(5 * 60);
/// How often a host should poll a plan task.
const PLAN_TASK_POLL_MS: u64 = 500;

mod calls;
mod live;
pub use live::{Live, Planned, Running, StepNow};

pub use calls::{Nesting, PlanCalls};

/// Why a plan could not be checked. Nothing ran.
pub enum Unchecked {
    /// It did not validate.
    Invalid(Vec<PlanIssue>),
    /// Validation did not finish (cancelled, out of time, or it broke).
    Unfinished(String),
}

/// A plan that validated, and what it needs approved before it runs.
pub struct Checked {
    pub plan: ValidatedPlan,
    /// `None` when no step's tier is covered by `[policy] confirm`.
    pub approval: Option<Request>,
}

impl Checked {
    /// What a lazy plan (`"mode": "lazy"`, `"dry_run": true`) answers, and what
    /// `planmux validate --json` prints: the schedule and the steps that would need
    /// approval. Nothing ran.
    pub fn planned(&self) -> Value {
        let needs: Vec<Value> = self
            .approval
            .iter()
            .flat_map(|asked| &asked.steps)
            .map(
                |s| serde_json::json!({"id": s.id, "tool": s.tool, "tier": s.tier, "args": s.args}),
            )
            .collect();
        let warnings: Vec<String> = self
            .plan
            .warnings()
            .iter()
            .map(|w| format!("{}: {}", w.location, w.message()))
            .collect();
        let mut planned = serde_json::json!({
            "status": "planned",
            "schedule": schedule(&self.plan).to_json(&self.plan),
            "needs_approval": needs,
        });
        if !warnings.is_empty() {
            planned["warnings"] = serde_json::json!(warnings);
        }
        planned
    }

    /// [`Self::planned`] as text, for hosts that read only text and for the terminal.
    pub fn planned_text(&self) -> String {
        let mut text = schedule(&self.plan).render_text(&self.plan);
        match &self.approval {
            None => text.push_str("needs approval: nothing\n"),
            Some(asked) => {
                let steps: Vec<String> = asked
                    .steps
                    .iter()
                    .map(|s| format!("{} ({}, {})", s.id, s.tool, s.tier.as_str()))
                    .collect();
                text.push_str(&format!("needs approval: {}\n", steps.join(", ")));
            }
        }
        text
    }
}

/// Runs plans against the downstreams.
pub struct PlanRunner {
    downstreams: Arc<Downstreams>,
    /// The limits plans run under, and the pipelines they may call.
    nesting: Arc<Nesting>,
    /// The last runs' records.
    pub runs: RunStore,
    /// The state slots each session's runs wrote, for its next plans.
    boards: Boards,
    /// Approvals asked for and not yet given.
    pub tokens: Tokens,
    /// The plans running as tasks (`"as_task": true`), for every session.
    pub tasks: TaskSet,
    /// The plans running now, step by step (for the console).
    pub live: Live,
}

impl PlanRunner {
    /// A runner with the limits of `config`.
    pub fn new(downstreams: Arc<Downstreams>, config: &Config) -> Self {
        // A plan task stays observable for as long as a plan may run, and a while after.
        let task_ttl = config.proxy.plan_timeout + PLAN_TASK_KEPT_AFTER;
        let task_ttl_ms = u64::try_from(task_ttl.as_millis()).unwrap_or(u64::MAX);
        let nesting = Nesting {
            pipelines: Pipelines::new(&config.pipelines),
            settings: Settings::from_config(config),
            limits: Limits {
                max_plan_steps: config.proxy.max_plan_steps,
                max_foreach_items: config.proxy.max_foreach_items,
            },
            max_output_chars: config.proxy.max_output_chars,
        };
        Self {
            downstreams,
            nesting: Arc::new(nesting),
            runs: RunStore::new(config.proxy.kept_runs, config.proxy.kept_run_bytes),
            boards: Boards::default(),
            tokens: Tokens::default(),
            tasks: TaskSet::new(KEPT_PLAN_TASKS, task_ttl_ms, PLAN_TASK_POLL_MS),
            live: Live::default(),
        }
    }

    /// The same runner, its approval tokens and run records kept in `store` (`[state]
    /// store`) when there is one.
    pub fn with_store(self, store: Option<Shared>) -> Self {
        Self {
            runs: self.runs.kept_in(store.clone()),
            tokens: Tokens::kept_in(store),
            ..self
        }
    }

    /// Parses and validates `execute_plan`'s arguments against the current catalog.
    pub fn validate(&self, arguments: &Value) -> Result<ValidatedPlan, Vec<PlanIssue>> {
        let catalog = self.downstreams.catalog();
        let specs = self.nesting.specs(catalog.tool_specs());
        prepare(arguments, &specs, &self.nesting.limits)
    }

    /// Every pipeline, checked against the current catalog.
    pub fn pipelines(&self) -> Vec<PipelineState> {
        let catalog = self.downstreams.catalog();
        self.nesting
            .pipelines
            .check(catalog.tool_specs(), &self.nesting.limits)
    }

    /// The pipelines a host is offered: those that can run now, less those `[policy]
    /// deny` names.
    pub fn listed_pipelines(&self) -> Vec<crate::pipelines::Ready> {
        let policy = self.downstreams.policy();
        self.pipelines()
            .into_iter()
            .filter_map(|state| state.ready.ok())
            .filter(|ready| !policy.denies(&ready.spec.exported))
            .collect()
    }

    /// The pipeline called `name`, as configured.
    pub fn pipeline(&self, name: &str) -> Option<&PipelineConfig> {
        self.nesting.pipelines.get(name)
    }

    /// The time limit of a whole plan (also of asking the host to approve one).
    pub fn plan_timeout(&self) -> std::time::Duration {
        self.nesting.settings.plan_timeout
    }

    /// The tiers plans need approval for (`[policy] confirm`).
    pub fn confirm(&self) -> Confirm {
        self.downstreams.policy().confirm
    }

    /// Validates a plan and works out what it needs approved; `cancel` stops it.
    ///
    /// Validation runs on a blocking thread, within the plan time limit: a heavy plan (or
    /// a hostile tool schema) never holds up other calls, the plan's own cancellation or
    /// a signal, which all live on the I/O thread.
    ///
    /// The plan starts from the state slots `owner`'s earlier runs wrote (seed 004's
    /// whiteboard; none without a session).
    ///
    /// It is checked as `grant`'s caller sees the catalog (a tool it may not use is an
    /// unknown one), with its own `confirm` when its rule sets one.
    ///
    /// Only the servers the plan names are waited for (started, if they were not): the
    /// plan is validated against the catalog as it is (what servers still starting
    /// listed last time included), then, once the servers its steps call (or its
    /// unknown tools name) have listed, again against their own lists. A plan whose
    /// tools only every server's list can tell (a bare unknown name, a resource step)
    /// waits for every server.
    pub async fn check(
        &self,
        arguments: Value,
        owner: Option<Owner>,
        grant: &Grant,
        cancel: &CancellationToken,
    ) -> Result<Checked, Unchecked> {
        let mut widened = false;
        // Each turn starts some servers or ends: at most once the named ones, once all.
        for _ in 0..3 {
            // Taken before validating: a server that lists while the plan is validated
            // against the catalog of before still counts as starting for this round.
            let starting = self.downstreams.starting();
            let checked = self
                .check_now(arguments.clone(), owner.clone(), grant, cancel)
                .await;
            if starting.is_empty() {
                return checked;
            }
            let wanted = match &checked {
                // A bare or folded name may be another server's too, once it has listed.
                Ok(checked)
                    if self.downstreams.any_unknown()
                        && !names_its_tools(&arguments, &checked.plan) =>
                {
                    None
                }
                Ok(checked) => self.servers_of(&checked.plan),
                Err(Unchecked::Invalid(issues)) => self.servers_named(issues),
                Err(Unchecked::Unfinished(_)) => return checked,
            };
            match wanted.map(|w| {
                w.into_iter()
                    .filter(|s| starting.contains(s))
                    .collect::<Vec<_>>()
            }) {
                Some(wanted) if wanted.is_empty() => return checked,
                Some(wanted) => self.downstreams.start_only(&wanted).await,
                None if widened => return checked,
                None => {
                    self.downstreams.start_all().await;
                    widened = true;
                }
            }
        }
        self.check_now(arguments, owner, grant, cancel).await
    }

    /// The servers the unknown tools of `issues` name by their prefix (or `server:tool`);
    /// `None` when one names none (a bare name: any server may have it), or when another
    /// issue may come of a list remembered from a server's last start.
    fn servers_named(&self, issues: &[PlanIssue]) -> Option<Vec<String>> {
        let mut servers = Vec::new();
        for issue in issues {
            match &issue.kind {
                IssueKind::UnknownTool { name, .. } => {
                    servers.push(self.downstreams.server_named_by(name)?);
                }
                IssueKind::ServerNotStarted { server, .. } => servers.push(server.clone()),
                // Found against a list remembered from a last start, which may be stale.
                _ if self.downstreams.any_recalled() => return None,
                _ => {}
            }
        }
        Some(servers)
    }

    /// The servers `plan`'s steps call, those of the pipelines it calls included; `None`
    /// when one is known only when it runs (a resource step).
    fn servers_of(&self, plan: &ValidatedPlan) -> Option<Vec<String>> {
        let configured = self.downstreams.servers();
        let pipelines = self.pipelines();
        let mut servers = Vec::new();
        for step in plan.steps() {
            if step.kind == crate::plan::StepKind::Value {
                continue;
            }
            if configured.iter().any(|s| s.config.name == step.server) {
                servers.push(step.server.clone());
                continue;
            }
            let pipeline = pipelines
                .iter()
                .filter(|p| step.server == crate::pipelines::PIPELINE_SERVER && p.name == step.tool)
                .find_map(|p| p.ready.as_ref().ok())?;
            servers.extend(pipeline.servers.iter().cloned());
        }
        Some(servers)
    }

    /// [`Self::check`] against the catalog as it is now.
    async fn check_now(
        &self,
        arguments: Value,
        owner: Option<Owner>,
        grant: &Grant,
        cancel: &CancellationToken,
    ) -> Result<Checked, Unchecked> {
        let catalog = self.downstreams.catalog_for(grant);
        let nesting = self.nesting.clone();
        let confirm = grant.confirm().unwrap_or(self.confirm());
        let board = self.boards.get(owner);
        let checking = tokio::task::spawn_blocking(move || {
            let specs = nesting.specs(catalog.tool_specs());
            let from_board = |name: &str| crate::exec::slot(&board, name);
            let plan = prepare_on(&arguments, &specs, &nesting.limits, &from_board)
                .map_err(Unchecked::Invalid)?;
            let approval = Request::for_plan(&plan, &arguments, confirm)
                .map_err(|issue| Unchecked::Invalid(vec![issue]))?;
            Ok(Checked { plan, approval })
        });
        let limit = self.nesting.settings.plan_timeout;
        let checked = tokio::select! {
            checked = tokio::time::timeout(limit, checking) => checked,
            () = cancel.cancelled() => return Err(Unchecked::Unfinished("the plan was cancelled while it was being validated".into())),
        };
        match checked {
            Ok(Ok(Err(Unchecked::Invalid(issues)))) => Err(Unchecked::Invalid(
                issues
                    .into_iter()
                    .map(|i| self.name_failed_server(i, grant))
                    .collect(),
            )),
            Err(_) => Err(Unchecked::Unfinished(format!(
                "validating the plan took longer than {} ms",
                limit.as_millis()
            ))),
            Ok(Err(broke)) => Err(Unchecked::Unfinished(format!(
                "validating the plan failed: {broke}"
            ))),
            Ok(Ok(Err(unchecked))) => Err(unchecked),
            Ok(Ok(Ok(checked))) => Ok(checked),
        }
    }

    /// An unknown tool that is denied, quarantined, or of a server that failed to start
    /// is named as that (as a direct call would be told), not as unknown with look-alikes
    /// the model might call instead.
    fn name_failed_server(&self, issue: PlanIssue, grant: &Grant) -> PlanIssue {
        let IssueKind::UnknownTool { name, .. } = &issue.kind else {
            return issue;
        };
        // Written as `server:tool` (seed 002's serverId and toolName): its exported name,
        // namespaced or not.
        let names = match name.split_once(':') {
            Some((server, tool)) => vec![
                crate::catalog::export_name(server, self.downstreams.separator(), tool),
                tool.to_owned(),
            ],
            None => vec![name.clone()],
        };
        // A tool the caller may not use stays unknown to it, whatever else is true of it.
        if !names.iter().any(|n| grant.allows(n)) {
            return issue;
        }
        let policy = self.downstreams.policy();
        if let Some(denied) = names.iter().find(|n| policy.denies(n)) {
            let kind = IssueKind::DeniedTool {
                name: denied.clone(),
            };
            return PlanIssue { kind, ..issue };
        }
        let catalog = self.downstreams.catalog();
        if let Some(held) = catalog
            .quarantined()
            .iter()
            .find(|q| names.contains(&q.exported))
        {
            let kind = IssueKind::QuarantinedTool {
                name: held.exported.clone(),
                change: held.change.clone(),
            };
            return PlanIssue { kind, ..issue };
        }
        match self.downstreams.never_started(name) {
            Some(DownstreamError::NeverStarted { server, reason }) => PlanIssue {
                kind: IssueKind::ServerNotStarted {
                    name: name.clone(),
                    server,
                    reason,
                },
                ..issue
            },
            _ => issue,
        }
    }

    /// The user said yes to `request`: the approval a run carries to the checkpoint.
    /// `caller` is who asked (as the audit trail names it; `None`: no identity).
    pub fn approve(&self, request: &Request, by: Approver, caller: Option<&str>) -> Arc<Approval> {
        Arc::new(request.approve(&self.downstreams.policy(), by, caller))
    }

    /// The user said no to `request` (or never answered): recorded in the audit trail.
    pub fn decline(&self, request: &Request, by: Approver, caller: Option<&str>) {
        request.decline(&self.downstreams.policy(), by, caller);
    }

    /// Runs a validated plan for `caller` (the host session that sent it, if any) and
    /// keeps its record (readable by that session only, when it has one). Steps that need approval are refused at the checkpoint unless
    /// `approval` names them.
    pub async fn run(
        &self,
        plan: &ValidatedPlan,
        approval: Option<Arc<Approval>>,
        caller: Option<Caller>,
        observer: &dyn Observer,
        cancel: CancellationToken,
    ) -> Arc<RunRecord> {
        let owner = caller.as_ref().and_then(Caller::owner);
        let calls = PlanCalls::nested(self.downstreams.clone(), approval, self.nesting.clone())
            .for_caller(caller);
        self.run_calls(plan, calls, owner, observer, cancel).await
    }

    /// [`Self::run`] for `who`, a caller with no host session (the console's user): its
    /// record has no owner, so it is read by its id alone.
    pub async fn run_by(
        &self,
        plan: &ValidatedPlan,
        approval: Option<Arc<Approval>>,
        who: &crate::identity::Identity,
        observer: &dyn Observer,
        cancel: CancellationToken,
    ) -> Arc<RunRecord> {
        let calls = PlanCalls::nested(self.downstreams.clone(), approval, self.nesting.clone())
            .for_identity(who);
        self.run_calls(plan, calls, None, observer, cancel).await
    }

    async fn run_calls(
        &self,
        plan: &ValidatedPlan,
        calls: PlanCalls,
        owner: Option<Owner>,
        observer: &dyn Observer,
        cancel: CancellationToken,
    ) -> Arc<RunRecord> {
        let calls = Arc::new(calls);
        let settings = &self.nesting.settings;
        let watching = self.live.watch(plan, observer);
        let running = run(plan, calls, settings, &watching, cancel);
        let record = Arc::new(match traces::inner("execute_plan".to_owned(), Vec::new()) {
            None => running.await,
            Some(cx) => {
                let record = running.with_context(cx.clone()).await;
                let attributes = vec![
                    traces::attribute("planmux.run_id", record.run_id.clone()),
                    traces::attribute("planmux.status", record.status.as_str()),
                    traces::attribute(
                        "planmux.steps",
                        i64::try_from(record.steps.len()).unwrap_or(i64::MAX),
                    ),
                ];
                // A plan that did not wholly succeed is an error in its trace.
                let failed = (record.status != crate::exec::RunStatus::Succeeded)
                    .then(|| format!("the plan {}", record.status.as_str()));
                traces::end(&cx, attributes, failed);
                record
            }
        });
        self.boards.write(owner.clone(), plan, &record);
        crate::metrics::plan_ended(&record);
        self.runs.insert(record.clone(), owner).await;
        record
    }

    /// The lean result of a run, as the model sees it.
    pub fn result(&self, record: &RunRecord) -> Value {
        record.result(self.nesting.max_output_chars)
    }

    /// The lean result and its text rendering, built on a blocking thread: cutting large
    /// outputs down to size is work in proportion to them.
    pub async fn answer(&self, record: Arc<RunRecord>) -> (Value, String) {
        let max = self.nesting.max_output_chars;
        let built = tokio::task::spawn_blocking(move || {
            let result = record.result(max);
            let text = record.render_text(&result);
            (result, text)
        });
        built.await.unwrap_or_else(|broke| {
            let text = format!("building the plan's result failed: {broke}");
            (serde_json::json!({"status": "failed", "error": text}), text)
        })
    }
}

/// Whether every tool step of `plan` named its tool so that no other server's list could
/// change which tool it is: by its exported name, or with its server (`server`, or
/// `server:tool`). A bare or folded name (`get_weather`, `Weather__Get-Weather`) is
/// resolved among the servers that have listed, and may be ambiguous once the others have.
fn names_its_tools(arguments: &Value, plan: &ValidatedPlan) -> bool {
    let Ok(written) = crate::plan::parse(arguments) else {
        return true;
    };
    plan.steps()
        .iter()
        .filter(|step| step.kind != crate::plan::StepKind::Value)
        .all(|step| {
            written.steps.get(step.index).is_some_and(|w| {
                w.server.is_some() || w.tool == step.exported || w.tool.contains(':')
            })
        })
}
