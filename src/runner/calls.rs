//! How a run's steps reach their tools: each call past the checkpoint with the run's
//! approval, a resource step as a read, a pipeline step as its plan.

use std::future::Future;
use std::sync::Arc;

use rmcp::model::ReadResourceRequestParams;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::approval::Request;
use crate::downstream::{Caller, DownstreamError, Downstreams};
use crate::exec::{InvokeError, Invoker, RunRecord, Settings, run};
use crate::pipelines::{PIPELINE_SERVER, Pipelines};
use crate::plan::{Limits, PlannedStep, RESOURCE_TOOL, ToolSpec, prepare};
use crate::policy::{Approval, Grant, Route};

impl PlanCalls {
    /// A resource step: the checkpoint (as a read), then `resources/read`, answered as a
    /// tool result would be: the text (parsed when it is JSON), or the contents.
    async fn read(
        &self,
        route: &Route,
        args: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, InvokeError> {
        let Some(uri) = args.get("uri").and_then(Value::as_str) else {
            return Err(InvokeError::Rejected(format!(
                "a resource step needs a URI string, got {}",
                crate::plan::describe_value(args.get("uri").unwrap_or(&Value::Null))
            )));
        };
        self.downstreams
            .authorize_read(uri, route, &self.grant)
            .map_err(|denied| InvokeError::Rejected(denied.to_string()))?;
        let params = ReadResourceRequestParams::new(uri);
        let read = self.downstreams.read_resource(params, cancel).await;
        let contents = read.map_err(invoke_error)?.contents;
        let contents = serde_json::to_value(&contents).unwrap_or_default();
        Ok(match contents.as_array().map(Vec::as_slice) {
            Some([one]) if one.get("text").is_some_and(Value::is_string) => {
                serde_json::json!({"content": [{"type": "text", "text": one["text"]}]})
            }
            _ => serde_json::json!({"content": [], "structuredContent": contents}),
        })
    }
}

/// How one run's steps call their tools: through the downstreams, by exported name, each
/// call past the checkpoint with the run's approval; a step that calls a pipeline runs
/// its plan.
pub struct PlanCalls {
    downstreams: Arc<Downstreams>,
    approval: Option<Arc<Approval>>,
    nesting: Arc<Nesting>,
    /// The host session the run is for: what a server asks during a step goes there.
    caller: Option<Caller>,
    /// What the run's caller may call (`[[access]]`).
    grant: Grant,
}

/// What steps that call a pipeline need to run its plan.
#[derive(Debug)]
pub struct Nesting {
    pub pipelines: Pipelines,
    pub settings: Settings,
    pub limits: Limits,
    pub max_output_chars: usize,
}

impl Default for Nesting {
    /// No pipelines, and the default limits.
    fn default() -> Self {
        Self {
            pipelines: Pipelines::default(),
            settings: Settings::default(),
            limits: Limits::default(),
            max_output_chars: crate::config::DEFAULT_MAX_OUTPUT_CHARS,
        }
    }
}

impl Nesting {
    /// The tools a plan may call: `catalog`'s, and the pipelines that can run now. Every
    /// plan check asks: without pipelines the catalog is lent, not copied.
    pub fn specs<'a>(&self, catalog: &'a [ToolSpec]) -> std::borrow::Cow<'a, [ToolSpec]> {
        if self.pipelines.is_empty() {
            return std::borrow::Cow::Borrowed(catalog);
        }
        let mut specs = catalog.to_vec();
        specs.extend(
            self.pipelines
                .check(catalog, &self.limits)
                .into_iter()
                .filter_map(|state| state.ready.ok().map(|ready| ready.spec)),
        );
        std::borrow::Cow::Owned(specs)
    }
}

impl PlanCalls {
    /// Calls through `downstreams` for a run the user approved with `approval` (if any),
    /// without pipelines.
    pub fn new(downstreams: Arc<Downstreams>, approval: Option<Arc<Approval>>) -> Self {
        Self::nested(downstreams, approval, Arc::default())
    }

    /// [`Self::new`], with the pipelines and limits steps that call a pipeline run under.
    pub fn nested(
        downstreams: Arc<Downstreams>,
        approval: Option<Arc<Approval>>,
        nesting: Arc<Nesting>,
    ) -> Self {
        let grant = downstreams.grant(None);
        Self {
            downstreams,
            approval,
            nesting,
            caller: None,
            grant,
        }
    }

    /// The same calls, made as `who` may make them (a caller with no host session: the
    /// console's user), the audit trail naming it.
    pub fn for_identity(mut self, who: &crate::identity::Identity) -> Self {
        self.grant = self.downstreams.grant(Some(who));
        self
    }

    /// The same calls, made for `caller` (and what it may call).
    pub fn for_caller(mut self, caller: Option<Caller>) -> Self {
        let who = caller.as_ref().and_then(|c| c.identity.as_ref());
        self.grant = self.downstreams.grant(who);
        self.caller = caller;
        self
    }

    /// A step that calls a pipeline: past the checkpoint as one step of its tier (the
    /// user's approval of this step covers what the pipeline does), then its plan, run
    /// with the step's arguments as inputs. Its output is the pipeline's result.
    async fn pipeline(
        &self,
        step: &PlannedStep,
        args: Value,
        route: &Route,
        cancel: CancellationToken,
    ) -> Result<Value, InvokeError> {
        let name = &step.exported;
        let policy = self.downstreams.policy();
        policy
            .authorize(name, Some(step.tier), None, route, &self.grant)
            .map_err(|denied| InvokeError::Rejected(denied.to_string()))?;
        let nesting = &self.nesting;
        let pipeline = nesting.pipelines.get(name).ok_or_else(|| {
            InvokeError::Rejected(format!("pipeline '{name}' is no longer configured"))
        })?;
        let arguments = Pipelines::arguments(pipeline, args);
        let catalog = self.downstreams.catalog();
        let specs = nesting.specs(catalog.tool_specs());
        let plan = prepare(&arguments, &specs, &nesting.limits).map_err(|issues| {
            InvokeError::Rejected(format!(
                "pipeline '{name}' cannot run:\n{}",
                crate::plan::IssueList(&issues)
            ))
        })?;
        // What the pipeline's steps need approved is covered by the user's yes to this
        // very step, and only when the pipeline is no more dangerous than it was then.
        let highest = plan.steps().iter().map(|s| s.tier).max();
        let approval = match Request::for_plan(&plan, &arguments, policy.confirm) {
            Ok(None) => None,
            Ok(Some(request)) => match &self.approval {
                Some(outer)
                    if outer.covers(step.id.as_str(), name)
                        && highest.is_none_or(|tier| tier <= step.tier) =>
                {
                    let caller = Some(self.grant.caller()).filter(|c| !c.is_empty());
                    Some(Arc::new(request.approve(&policy, outer.by(), caller)))
                }
                _ => {
                    return Err(InvokeError::Rejected(format!(
                        "pipeline '{name}' has steps that need approval, and this step was not approved for them (the pipeline may have changed since); send the plan again"
                    )));
                }
            },
            Err(issue) => {
                return Err(InvokeError::Rejected(format!("pipeline '{name}': {issue}")));
            }
        };
        let calls = Arc::new(
            Self::nested(self.downstreams.clone(), approval, nesting.clone())
                .for_caller(self.caller.clone()),
        );
        // Boxed: a pipeline's plan may call a pipeline in turn.
        let running: std::pin::Pin<Box<dyn Future<Output = RunRecord> + Send + '_>> = Box::pin(
            run(&plan, calls, &nesting.settings, &crate::exec::Quiet, cancel),
        );
        let record = running.await;
        let result = record.result(nesting.max_output_chars);
        let text = record.render_text(&result);
        Ok(serde_json::json!({
            "structuredContent": result,
            "content": [{"type": "text", "text": text}],
            "isError": crate::exec::is_error(&record),
        }))
    }
}

impl Invoker for PlanCalls {
    async fn invoke(
        &self,
        run: &str,
        step: &PlannedStep,
        args: Value,
        cancel: CancellationToken,
    ) -> Result<Value, InvokeError> {
        let route = Route::Plan {
            run: run.to_owned(),
            step: step.id.to_string(),
            approval: self.approval.clone(),
        };
        if step.exported == RESOURCE_TOOL {
            return self.read(&route, args, &cancel).await;
        }
        if step.server == PIPELINE_SERVER {
            return self.pipeline(step, args, &route, cancel).await;
        }
        let proof = self
            .downstreams
            .authorize(&step.exported, &route, &self.grant)
            .await
            .map_err(|denied| InvokeError::Rejected(denied.to_string()))?;
        let arguments = match args {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return Err(InvokeError::Rejected(format!(
                    "arguments must be an object, got {}",
                    crate::plan::describe_value(&other)
                )));
            }
        };
        let result = self
            .downstreams
            .call_tool_json(
                &step.exported,
                arguments,
                &proof,
                self.caller.as_ref(),
                &cancel,
            )
            .await
            .map_err(invoke_error)?;
        if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
            return Err(InvokeError::Rejected(format!(
                "{} asked for more input, which a plan cannot give; call it directly",
                step.exported
            )));
        }
        Ok(result)
    }
}

/// A downstream's failure as a step's: cancelled, timed out, unavailable (a server that
/// did not start, is down or exited: worth a retry), or rejected (anything a retry would
/// meet again). The one mapping, for tool and resource steps alike.
fn invoke_error(error: DownstreamError) -> InvokeError {
    match error {
        DownstreamError::Cancelled { .. } => InvokeError::Cancelled,
        e @ DownstreamError::Timeout { .. } => InvokeError::Timeout(e.to_string()),
        e @ (DownstreamError::StartFailed { .. }
        | DownstreamError::NeverStarted { .. }
        | DownstreamError::Down { .. }
        | DownstreamError::Exited { .. }) => InvokeError::Unavailable(e.to_string()),
        e @ (DownstreamError::UnknownTool { .. }
        | DownstreamError::AmbiguousTool { .. }
        | DownstreamError::UnknownPrompt { .. }
        | DownstreamError::UnknownResource { .. }
        | DownstreamError::Rpc { .. }
        | DownstreamError::Protocol { .. }
        | DownstreamError::Unanswered { .. }
        | DownstreamError::TaskCancelled { .. }
        | DownstreamError::Closed { .. }
        | DownstreamError::NeedsSignIn { .. }
        | DownstreamError::Unauthorized { .. }) => InvokeError::Rejected(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::approval::{ApprovalStep, digest};
    use crate::config::Config;
    use crate::pipelines::PIPELINE_SERVER;
    use crate::policy::{Approver, Tier};

    /// The demo servers, and a pipeline `save` that writes a file (so its steps need
    /// approval under the default `confirm = "write"`).
    async fn setup() -> (Arc<Downstreams>, Arc<Nesting>, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let text = r#"
[servers.files]
builtin = "files"
cwd = "sandbox"

[[pipelines.save.plan.steps]]
id = "write"
tool = "files__write_file"
args = { path = "note.txt", content = "${input.text}" }
"#;
        let config = Config::parse(text, "test", dir.path(), &|_| None).expect("config");
        let downstreams = Downstreams::start(&config, Arc::default()).await;
        let nesting = Nesting {
            pipelines: Pipelines::new(&config.pipelines),
            ..Nesting::default()
        };
        (downstreams, Arc::new(nesting), dir)
    }

    fn step(id: &str, tier: Tier) -> PlannedStep {
        let plan = prepare(
            &json!({"steps": [{"id": id, "tool": "save", "args": {"text": "hi"}}]}),
            &[ToolSpec {
                exported: "save".into(),
                server: PIPELINE_SERVER.into(),
                tool: "save".into(),
                input_schema: json!({"type": "object"}),
                output_schema: None,
                read_only: false,
                idempotent: false,
                tier,
            }],
            &Limits::default(),
        )
        .expect("plan");
        plan.steps()[0].clone()
    }

    fn approval(downstreams: &Downstreams, steps: &[(&str, &str, Tier)]) -> Arc<Approval> {
        let request = Request {
            goal: None,
            steps: steps
                .iter()
                .map(|(id, tool, tier)| ApprovalStep {
                    id: (*id).into(),
                    tool: (*tool).into(),
                    tier: *tier,
                    args: json!({}),
                    foreach: None,
                    items: None,
                    when: None,
                })
                .collect(),
            inputs: None,
            values: Vec::new(),
            digest: digest(&json!({})),
        };
        Arc::new(request.approve(&downstreams.policy(), Approver::Flag, None))
    }

    fn call(
        downstreams: &Arc<Downstreams>,
        nesting: &Arc<Nesting>,
        approval: Option<Arc<Approval>>,
    ) -> PlanCalls {
        PlanCalls::nested(downstreams.clone(), approval, nesting.clone())
    }

    #[tokio::test]
    async fn a_pipeline_step_runs_its_plan_only_under_the_approval_of_that_step() {
        let (downstreams, nesting, dir) = setup().await;
        let written = dir.path().join("sandbox/note.txt");
        let run = "r1";
        let args = || json!({"text": "hi"});
        // Approved as itself, at its tier: it runs, and its inner write is approved.
        let approved = approval(&downstreams, &[("p", "save", Tier::Destructive)]);
        let calls = call(&downstreams, &nesting, Some(approved));
        let result = calls
            .invoke(
                run,
                &step("p", Tier::Destructive),
                args(),
                CancellationToken::new(),
            )
            .await;
        let result = result.expect("ran");
        assert_eq!(
            result["structuredContent"]["status"], "succeeded",
            "{result:#}"
        );
        assert!(written.is_file());
        std::fs::remove_file(&written).expect("removed");

        // Refused, each: the run's approval names another step (the pipeline's writes are
        // not covered); it was approved as a write and now destroys; no approval at all
        // (the checkpoint refuses the step itself).
        let refusals = [
            (
                Some(("q", "files__write_file", Tier::Destructive)),
                Tier::Read,
            ),
            (Some(("p", "save", Tier::Write)), Tier::Write),
            (None, Tier::Destructive),
        ];
        for (approved, tier) in refusals {
            let approval = approved.map(|one| approval(&downstreams, &[one]));
            let calls = call(&downstreams, &nesting, approval);
            let refused = calls
                .invoke(run, &step("p", tier), args(), CancellationToken::new())
                .await;
            assert!(
                matches!(&refused, Err(InvokeError::Rejected(why)) if why.contains("not approved")),
                "{approved:?}: {refused:?}"
            );
        }
        assert!(!written.exists(), "nothing was written without approval");
        downstreams.shutdown().await;
    }
}
