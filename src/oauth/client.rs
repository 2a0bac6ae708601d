//! The HTTP client of a server planmux signs in to: rmcp's `AuthClient` (a token on each
//! request, one refresh and one retry on a 401) with what planmux adds around it: a
//! client-credentials token fetched again when it runs out, one step-up when a
//! client-credentials server wants more scope, and the server's [`Standing`] noted when it
//! asks for a sign-in planmux cannot give by itself, so that its calls say what to do
//! instead of retrying.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{AuthClient, AuthError, AuthorizationManager, ClientCredentialsConfig};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Error as SseError, Sse};

use super::store::Store;

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

/// Whether a server's sign-in works, as its connection last found it.
#[derive(Default)]
pub struct Standing {
    signed_out: Mutex<Option<SignedOut>>,
}

/// Why a server needs the user to sign in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedOut {
    /// Whether the user had signed in before (the message says "again").
    pub again: bool,
    /// What happened, for the message.
    pub why: String,
}

impl Standing {
    /// Why the server needs a sign-in, if it does.
    pub fn signed_out(&self) -> Option<SignedOut> {
        self.signed_out
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(super) fn set(&self, signed_out: Option<SignedOut>) {
        *self
            .signed_out
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = signed_out;
    }
}

/// A client-credentials grant: how its token is fetched again.
pub(super) struct Grant {
    pub(super) config: Mutex<ClientCredentialsConfig>,
    /// The server it is for (what metrics name).
    pub(super) server: String,
}

/// The streamable-HTTP client of a server planmux signs in to.
#[derive(Clone)]
pub struct SignedInClient {
    pub(super) inner: AuthClient<reqwest::Client>,
    pub(super) standing: Arc<Standing>,
    pub(super) grant: Option<Arc<Grant>>,
    /// Where its tokens are kept (browser sign-in only), to note a step-up's scope.
    pub(super) store: Option<Store>,
    /// Whether it had tokens when it connected.
    pub(super) had_tokens: bool,
}

impl SignedInClient {
    /// A client-credentials token that is missing or ran out is fetched again; a
    /// browser sign-in's is rmcp's to refresh.
    async fn ensure_token(&self) -> HttpResult<()> {
        let Some(grant) = &self.grant else {
            return Ok(());
        };
        let manager = self.inner.auth_manager.lock().await;
        match manager.get_access_token().await {
            Ok(_) => Ok(()),
            Err(AuthError::AuthorizationRequired) => {
                let config = grant
                    .config
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                tracing::info!("client-credentials token expired: fetching a new one");
                crate::metrics::token_refreshed(&grant.server);
                manager.exchange_client_credentials(&config).await?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Sends with `send`, after making sure of the token; on insufficient_scope, one
    /// step-up (client credentials) or a note of the scope for the next sign-in.
    async fn send<T, F, Fut>(&self, send: F) -> HttpResult<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = HttpResult<T>>,
    {
        // A sign-in its authorization server refused to renew stays refused until the
        // user signs in again (which clears the record's mark): nothing is sent meanwhile,
        // neither the refresh token again nor a request without a token.
        if self.known_signed_out() {
            return Err(StreamableHttpError::Auth(AuthError::AuthorizationRequired));
        }
        self.ensure_token().await?;
        match send().await {
            Err(StreamableHttpError::InsufficientScope(e)) => {
                let scope = e.required_scope.clone();
                match (&self.grant, scope) {
                    (Some(grant), Some(scope)) => {
                        self.step_up(grant, &scope).await?;
                        self.noted(send().await)
                    }
                    (None, Some(scope)) => {
                        self.want_scope(&scope);
                        self.noted(Err(StreamableHttpError::InsufficientScope(e)))
                    }
                    _ => self.noted(Err(StreamableHttpError::InsufficientScope(e))),
                }
            }
            other => self.noted(other),
        }
    }

    /// Whether this connection found its browser sign-in refused and the store still says
    /// so (no new `planmux login` since).
    fn known_signed_out(&self) -> bool {
        let Some(store) = &self.store else {
            return false;
        };
        self.standing.signed_out().is_some()
            && store.read().is_ok_and(|record| record.signed_out.is_some())
    }

    /// Client credentials with `scope` added, fetched once.
    async fn step_up(&self, grant: &Grant, scope: &str) -> HttpResult<()> {
        let config = {
            let mut config = grant.config.lock().unwrap_or_else(PoisonError::into_inner);
            if let ClientCredentialsConfig::ClientSecret { scopes, .. } = &mut *config
                && !scopes.iter().any(|s| s == scope)
            {
                scopes.push(scope.to_owned());
            }
            config.clone()
        };
        tracing::info!(scope, "the server wants more scope: one step-up");
        let manager = self.inner.auth_manager.lock().await;
        manager.exchange_client_credentials(&config).await?;
        Ok(())
    }

    /// Remembers a scope the server asked for, for the next `planmux login`.
    fn want_scope(&self, scope: &str) {
        let Some(store) = &self.store else { return };
        let scopes: Vec<String> = scope.split_whitespace().map(str::to_owned).collect();
        let noted = store.update(|record| {
            for scope in scopes {
                if !record.wanted_scopes.contains(&scope) {
                    record.wanted_scopes.push(scope);
                }
            }
        });
        if let Err(e) = noted {
            tracing::warn!(error = %e, "could not note the scope the server asked for");
        }
        self.standing.set(Some(SignedOut {
            again: true,
            why: format!("it needs more permission (scope '{scope}') than the sign-in gave"),
        }));
    }

    /// Notes what an answer says of the sign-in.
    fn noted<T>(&self, result: HttpResult<T>) -> HttpResult<T> {
        if let (Some(store), Some(challenge)) = (
            &self.store,
            result.as_ref().err().and_then(|e| e.auth_challenge()),
        ) {
            let challenge = challenge.to_owned();
            if let Err(e) = store.update(|record| record.challenge = Some(challenge)) {
                tracing::warn!(error = %e, "could not keep the server's challenge");
            }
        }
        match &result {
            Err(StreamableHttpError::AuthRequired(_)) => {
                let why = match (self.grant.is_some(), self.had_tokens) {
                    (true, _) => "it refused planmux's client-credentials token",
                    (false, true) => "it no longer accepts the sign-in and it could not be renewed",
                    (false, false) => "it asks for a sign-in (OAuth)",
                };
                tracing::warn!(reason = why, "sign-in needed");
                self.standing.set(Some(SignedOut {
                    again: self.had_tokens,
                    why: why.to_owned(),
                }));
            }
            Err(StreamableHttpError::Auth(
                AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_),
            )) => {
                self.standing.set(Some(SignedOut {
                    again: true,
                    why: "its authorization server refused to renew the sign-in".into(),
                }));
            }
            // The sign-in works (again: a new `planmux login` the connection picked up
            // from the store): a later failure of the server is not blamed on it.
            Ok(_) => self.standing.set(None),
            _ => {}
        }
        result
    }
}

impl StreamableHttpClient for SignedInClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.send(|| {
            self.inner.post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.send(|| {
            self.inner.post_message_with_max_sse_event_size(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        self.send(|| {
            self.inner.delete_session(
                uri.clone(),
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        self.send(|| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        self.send(|| {
            self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}

/// The manager a server's client and its sign-in use: private addresses allowed (a
/// company's authorization server often has one), link-local and cloud metadata
/// addresses refused (rmcp).
pub(super) async fn manager(url: &str) -> Result<AuthorizationManager, AuthError> {
    AuthorizationManager::new_allowing_private_addresses(url).await
}
