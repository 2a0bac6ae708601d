//! A host that shows links (URL-mode elicitation) and a server whose sign-in was revoked:
//! the host's call is not answered "sign in again" but offered the sign-in link; the host
//! opens it (the headless browser completes the login at the real authorization server),
//! planmux says the sign-in is complete, and the same call returns the tool's answer.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, CustomNotification, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, Implementation, UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::json;

use super::oauth::{Fixture, until_renewal_due};
use super::support::Timer;
use crate::common::{call, text};

/// What the host saw: the links it was offered, the completions it was told of.
#[derive(Default)]
struct Seen {
    links: Vec<String>,
    completed: Vec<String>,
}

/// A host whose user opens every link it is offered in a browser (here: `browser`, the
/// headless one, run on the URL) and accepts.
#[derive(Clone)]
struct LinkOpener {
    browser: String,
    seen: Arc<Mutex<Seen>>,
}

impl ClientHandler for LinkOpener {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        let mut modes = ElicitationCapability::default();
        modes.url = Some(UrlElicitationCapability::default());
        capabilities.elicitation = Some(modes);
        ClientConfig::new(capabilities, Implementation::new("link-opener", "0"))
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::UrlElicitationParams { url, .. } = params else {
            return Err(ErrorData::invalid_params("a form: not expected here", None));
        };
        if let Ok(mut seen) = self.seen.lock() {
            seen.links.push(url.clone());
        }
        // The user opens the link; the host answers at once (the sign-in goes on in the
        // browser, and planmux says when it is complete).
        let mut words = self.browser.split_whitespace();
        let program = words.next().unwrap_or_default().to_owned();
        let args: Vec<String> = words.map(str::to_owned).collect();
        let opened = tokio::process::Command::new(program)
            .args(args)
            .arg(&url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .kill_on_drop(false)
            .spawn();
        if let Ok(mut child) = opened {
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
            });
        }
        Ok(ElicitResult::new(ElicitationAction::Accept))
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _: NotificationContext<RoleClient>,
    ) {
        if notification.method == "notifications/elicitation/complete"
            && let Ok(mut seen) = self.seen.lock()
        {
            let id = notification.params.unwrap_or_default()["elicitationId"].to_string();
            seen.completed.push(id);
        }
    }
}

#[tokio::test]
async fn a_host_that_shows_links_is_offered_the_sign_in_and_its_call_goes_on() -> anyhow::Result<()>
{
    let _t = Timer::start("oauth_link");
    let fixture = Fixture::start().await?;
    let login = fixture.login(&[], "", "info").await?;
    assert!(
        login.status.success(),
        "{}",
        String::from_utf8_lossy(&login.stderr)
    );

    let seen = Arc::new(Mutex::new(Seen::default()));
    let host = LinkOpener {
        browser: fixture.browser(""),
        seen: seen.clone(),
    };
    let mut command = fixture.planmux(&["serve"], "false", "info");
    command.stdin(Stdio::piped());
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()?;
    let client = host.serve(transport).await?;
    let add = || client.call_tool(call("remote__add", json!({"a": 2, "b": 3})));
    let first = tokio::time::timeout(Duration::from_secs(40), add()).await??;
    assert_ne!(first.is_error, Some(true), "{}", text(&first));

    // The grant is revoked; once the token is due for renewal, the renewal is refused.
    fixture.admin("POST", "/admin/revoke?sub=alice").await?;
    let refused_before = fixture.refused_refreshes().await?;
    until_renewal_due(&fixture).await;
    let answered = tokio::time::timeout(Duration::from_secs(60), add()).await??;
    assert_eq!(
        fixture.refused_refreshes().await?,
        refused_before + 1,
        "the renewal was refused:\n{}",
        fixture.logs()
    );
    assert_ne!(
        answered.is_error,
        Some(true),
        "{}\n{}",
        text(&answered),
        fixture.logs()
    );
    assert_eq!(answered.structured_content, Some(json!({"result": 5})));
    let seen = seen.lock().map_err(|e| anyhow::anyhow!("{e}"))?;
    assert_eq!(seen.links.len(), 1, "one link offered: {:?}", seen.links);
    assert!(
        seen.links[0].contains("/auth?") && seen.links[0].contains("code_challenge="),
        "{}",
        seen.links[0]
    );
    assert_eq!(seen.completed.len(), 1, "told the sign-in completed once");
    Ok(())
}
