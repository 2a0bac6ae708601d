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
    /// The records the caller of `context` may read, as resources. A shared store that
    /// cannot be reached lists none of them (the servers' resources are listed all the
    /// same); reading one says why.
    pub(super) async fn run_resources(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Vec<Resource> {
        let listed = match self.runner.runs.list(self.viewer(context)).await {
            Ok(listed) => listed,
            Err(error) => {
                tracing::warn!(%error, "run records not listed");
                return Vec::new();
            }
        };
        listed
            .into_iter()
            .map(|run| {
                let mut resource = Resource::new(
                    format!("{RUNS_URI}{}", run.run_id),
                    format!("run {}", run.run_id),
                )
                .with_description(run.description);
                resource.mime_type = Some("application/json".into());
                resource
            })
            .collect()
    }

    /// The record of run `id` (at `uri`), if `viewer` may read it and it is kept.
    pub(super) async fn read_run(
        &self,
        id: &str,
        uri: &str,
        viewer: Option<Owner>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let text = self.runner.runs.read(id, viewer).await.map_err(|error| {
            ErrorData::internal_error(format!("run record at '{uri}' not read: {error}"), None)
        })?;
        let text = text.ok_or_else(|| {
            ErrorData::resource_not_found(
                format!("no run record at '{uri}' (only the last runs are kept)"),
                None,
            )
        })?;
        let contents = ResourceContents::text(text, uri).with_mime_type("application/json");
        Ok(complete_read(ReadResourceResult::new(vec![contents])))
    }
}
