//! planmux's own resources: the records of recent plan runs, `planmux://runs/{run_id}`,
//! each readable by the session that ran it.

use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
use rmcp::service::RequestContext;

use super::Upstream;
use super::answers::complete_read;
use crate::identity::Owner;

/// Run records are resources under this prefix: `planmux://runs/{run_id}`.
pub(super) const RUNS_URI: &str = "planmux://runs/";

/// The template every run record's URI fits.
pub(super) fn template() -> ResourceTemplate {
    let mut template = ResourceTemplate::new(format!("{RUNS_URI}{{run_id}}"), "plan run record")
        .with_description(
            "The full record of a recent execute_plan run: resolved arguments, outputs, timings.",
        );
    template.mime_type = Some("application/json".into());
    template
}

impl Upstream {
    /// The records the session of `context` may read, as resources.
    pub(super) fn run_resources(&self, context: &RequestContext<RoleServer>) -> Vec<Resource> {
        self.runner
            .runs
            .list(self.viewer(context))
            .iter()
            .map(|run| {
                let goal = run
                    .goal
                    .as_deref()
                    .map(|g| format!(": {g}"))
                    .unwrap_or_default();
                let mut resource = Resource::new(
                    format!("{RUNS_URI}{}", run.run_id),
                    format!("run {}", run.run_id),
                )
                .with_description(format!(
                    "{} plan, {}, {} ms{goal}",
                    run.status.as_str(),
                    crate::text::count(run.steps.len(), "step"),
                    run.duration_ms.round(),
                ));
                resource.mime_type = Some("application/json".into());
                resource
            })
            .collect()
    }

    /// The record of run `id` (at `uri`), if `viewer` may read it and it is kept.
    pub(super) fn read_run(
        &self,
        id: &str,
        uri: &str,
        viewer: Option<Owner>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let record = self.runner.runs.get(id, viewer).ok_or_else(|| {
            ErrorData::resource_not_found(
                format!("no run record at '{uri}' (only the last runs are kept)"),
                None,
            )
        })?;
        let text = serde_json::to_string_pretty(&*record)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let contents = ResourceContents::text(text, uri).with_mime_type("application/json");
        Ok(complete_read(ReadResourceResult::new(vec![contents])))
    }
}
