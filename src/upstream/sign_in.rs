//! A host's call to a server that needs the user to sign in (OAuth), when the host can
//! show a link (URL-mode elicitation, protocol 2025-11-25) and runs planmux itself (over
//! stdio: the browser's redirect comes back to a loopback port of the same machine):
//! planmux prepares the sign-in
//! (`oauth::login::begin`), offers its link to the host, waits for the browser's redirect,
//! tells the host the sign-in is complete (`notifications/elicitation/complete`), and the
//! waiting call goes on. Calls that meet the same server meanwhile wait for this one
//! sign-in rather than offer another.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    CancelledNotificationParam, ClientResult, CustomNotification, ElicitRequest,
    ElicitRequestParams, ElicitationAction, ServerNotification, ServerRequest,
};
use rmcp::service::{PeerRequestOptions, RequestContext};

use super::Upstream;
use crate::oauth::login::DEFAULT_TIMEOUT;

/// How long a host's user has to finish signing in.
const SIGN_IN_LIMIT: Duration = DEFAULT_TIMEOUT;

impl Upstream {
    /// Offers the host the sign-in of `server` and waits for it; `Ok` once the user has
    /// signed in (by this offer or another meanwhile), else why not.
    pub(super) async fn offer_sign_in(
        &self,
        server: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), String> {
        let takes_links = context.peer.peer_info().is_some_and(|info| {
            (info.capabilities.elicitation.as_ref()).is_some_and(|modes| modes.url.is_some())
        });
        if !takes_links {
            return Err("the host cannot show a sign-in link".into());
        }
        // The redirect comes back to a loopback port of this machine: a host reaching
        // planmux over HTTP may be on another one, whose browser could not deliver it.
        if self.host.is_shared() {
            return Err("the host reaches planmux over HTTP; sign in on planmux's machine".into());
        }
        let Some(found) = self.downstreams.signs_in_with_browser(server) else {
            return Err(format!("'{server}' does not sign in with a browser"));
        };
        let turn = tokio::time::timeout(SIGN_IN_LIMIT, found.sign_in_turn()).await;
        let Ok(_turn) = turn else {
            return Err("another sign-in to it did not finish".into());
        };
        if !found.waits_for_sign_in() {
            // Signed in while this call waited for its turn.
            return Ok(());
        }
        let pending = crate::oauth::login::begin(&found.config, None).await?;
        let id = uuid::Uuid::new_v4().to_string();
        let params = ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: format!(
                "Sign in to '{server}' so that planmux can reach it; the call goes on once you have."
            ),
            url: pending.url().to_owned(),
            elicitation_id: id.clone(),
        };
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        let peer = &context.peer;
        let handle = peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| format!("the sign-in link could not be offered: {e}"))?;
        let request_id = handle.id.clone();
        let asked = handle.await_response();
        let finishing = pending.finish(SIGN_IN_LIMIT);
        tokio::pin!(asked, finishing);
        // The browser's redirect may come before the host's answer (a host may answer once
        // its dialog closes): both are awaited, a refusal ending the wait.
        let outcome = tokio::select! {
            answer = &mut asked => match answer {
                Ok(ClientResult::ElicitResult(reply)) if reply.action == ElicitationAction::Accept => {
                    tokio::select! {
                        outcome = &mut finishing => outcome.map(|_| ()),
                        () = context.ct.cancelled() => Err("the call was cancelled during the sign-in".into()),
                    }
                }
                Ok(ClientResult::ElicitResult(_)) => Err("the sign-in was declined".into()),
                Ok(_) => Err("the host answered the sign-in link with something else".into()),
                Err(e) => Err(format!("the host did not show the sign-in link ({e})")),
            },
            outcome = &mut finishing => {
                let param = CancelledNotificationParam::new(Some(request_id), Some("signed in".into()));
                let _ = tokio::time::timeout(Duration::from_secs(1), peer.notify_cancelled(param)).await;
                outcome.map(|_| ())
            }
            () = context.ct.cancelled() => Err("the call was cancelled during the sign-in".into()),
        };
        if outcome.is_ok() {
            let done = CustomNotification::new(
                "notifications/elicitation/complete",
                Some(serde_json::json!({ "elicitationId": id })),
            );
            let notify = peer.send_notification(ServerNotification::CustomNotification(done));
            let _ = tokio::time::timeout(Duration::from_secs(1), notify).await;
            tracing::info!(server, "signed in through the host's link");
        }
        outcome
    }
}
