//! Signing in to remote servers (DESIGN §13): planmux is the OAuth 2.1 client of its
//! `url` servers, on rmcp's `auth` feature (discovery, registration, PKCE, token
//! exchange and refresh are rmcp's). Here: where a sign-in is kept (`store`), the HTTP
//! client that carries it and notes when it stops working (`client`), and the browser
//! sign-in of `planmux login` (`login`).

mod callback;
mod client;
pub mod keychain;
pub mod login;
pub mod probe;
pub mod store;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::transport::auth::{
    AuthClient, AuthError, ClientCredentialsConfig, OAuthClientConfig, OAuthTokenResponse,
};

use client::{Grant, manager};
pub use client::{SignedInClient, SignedOut, Standing};
use store::Store;

use crate::config::{SignIn, Transport};

/// The HTTP client for the server `server` at `url`, signed in as `sign_in` says;
/// `standing` hears when the server needs the user to sign in. An error says why it
/// cannot be made (a sign-in that is known not to work is also noted in `standing`).
pub async fn client(
    server: &str,
    url: &str,
    sign_in: &SignIn,
    standing: Arc<Standing>,
) -> Result<SignedInClient, String> {
    standing.set(None);
    let http = reqwest::Client::default();
    match sign_in {
        SignIn::Header => Err("it signs in with its Authorization header, not OAuth".into()),
        SignIn::ClientCredentials {
            client_id,
            client_secret,
            scopes,
        } => {
            let config = ClientCredentialsConfig::ClientSecret {
                client_id: client_id.clone(),
                client_secret: client_secret.0.clone(),
                scopes: scopes.clone(),
                resource: Some(url.to_owned()),
            };
            let manager = client_credentials(url, &config)
                .await
                .map_err(|e| format!("cannot get a client-credentials token: {}", reason(&e)))?;
            Ok(SignedInClient {
                inner: AuthClient::new(http, manager),
                standing,
                grant: Some(Arc::new(Grant {
                    config: std::sync::Mutex::new(config),
                    server: server.to_owned(),
                })),
                store: None,
                had_tokens: true,
            })
        }
        SignIn::Browser(configured) => {
            let store = Store::new(server, url)?;
            let record = store.read()?;
            if let Some(why) = &record.signed_out {
                let signed_out = SignedOut {
                    again: true,
                    why: why.clone(),
                };
                standing.set(Some(signed_out.clone()));
                return Err(signed_out.why);
            }
            let mut manager = manager(url).await.map_err(|e| e.to_string())?;
            manager.set_credential_store(store.clone());
            let had_tokens = record
                .credentials
                .as_ref()
                .is_some_and(|c| c.token_response.is_some());
            if had_tokens {
                match manager.initialize_from_store().await {
                    Ok(true) => {}
                    Ok(false) => {
                        let why = "its authorization server changed since you signed in";
                        standing.set(Some(SignedOut {
                            again: true,
                            why: why.into(),
                        }));
                        return Err(why.into());
                    }
                    Err(e) => {
                        return Err(format!(
                            "cannot reach its authorization server: {}",
                            reason(&e)
                        ));
                    }
                }
                // A confidential client refreshes with its secret.
                let client_id = record
                    .credentials
                    .as_ref()
                    .map(|c| c.client_id.clone())
                    .unwrap_or_default();
                let secret = match (&configured.client_id, &record.registration) {
                    (Some(id), _) if *id == client_id => {
                        configured.client_secret.as_ref().map(|s| s.0.clone())
                    }
                    (_, Some(registration)) if registration.client_id == client_id => {
                        registration.client_secret.clone()
                    }
                    _ => None,
                };
                if let Some(secret) = secret {
                    let config = OAuthClientConfig::new(client_id, url).with_client_secret(secret);
                    manager
                        .configure_client(config)
                        .map_err(|e| e.to_string())?;
                }
            }
            Ok(SignedInClient {
                inner: AuthClient::new(http, manager),
                standing,
                grant: None,
                store: Some(store),
                had_tokens,
            })
        }
    }
}

/// A manager holding a client-credentials token for `url`.
async fn client_credentials(
    url: &str,
    config: &ClientCredentialsConfig,
) -> Result<rmcp::transport::auth::AuthorizationManager, AuthError> {
    let mut manager = manager(url).await?;
    let resolution = manager.resolve_metadata().await?;
    manager.set_metadata(resolution.metadata);
    manager.validate_client_credentials_metadata(config)?;
    manager.configure_client_credentials(config)?;
    manager.exchange_client_credentials(config).await?;
    Ok(manager)
}

/// A server's sign-in as `planmux check` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Its Authorization header: no OAuth.
    Header,
    /// Client credentials: planmux signs in by itself.
    ClientCredentials,
    /// Never signed in (or logged out).
    NotSignedIn,
    /// Signed in: until when the access token lasts (it renews itself with a refresh
    /// token when there is one), with which scopes, from which issuer.
    SignedIn {
        expires_in: Option<Duration>,
        renewable: bool,
        scopes: Vec<String>,
        issuer: Option<String>,
    },
    /// Signed in once, but it no longer works: why.
    SignedOut { why: String },
}

/// The sign-in of `server` as kept, without any network.
pub fn status(server: &str, transport: &Transport) -> Result<Option<Status>, String> {
    let Transport::Http { url, sign_in, .. } = transport else {
        return Ok(None);
    };
    let status = match sign_in {
        SignIn::Header => Status::Header,
        SignIn::ClientCredentials { .. } => Status::ClientCredentials,
        SignIn::Browser(_) => {
            let record = Store::new(server, url)?.read()?;
            match (record.signed_out, record.credentials) {
                (Some(why), _) => Status::SignedOut { why },
                (None, Some(credentials)) => match &credentials.token_response {
                    Some(token) => Status::SignedIn {
                        expires_in: expires_in(token, credentials.token_received_at),
                        renewable: token_has_refresh(token),
                        scopes: credentials.granted_scopes.clone(),
                        issuer: credentials.issuer.clone(),
                    },
                    None => Status::NotSignedIn,
                },
                (None, None) => Status::NotSignedIn,
            }
        }
    };
    Ok(Some(status))
}

fn token_has_refresh(token: &OAuthTokenResponse) -> bool {
    use oauth2::TokenResponse as _;
    token.refresh_token().is_some()
}

/// How long the access token has left (zero once expired).
fn expires_in(token: &OAuthTokenResponse, received_at: Option<u64>) -> Option<Duration> {
    use oauth2::TokenResponse as _;
    let lifetime = token.expires_in()?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let elapsed = now.saturating_sub(received_at?);
    Some(lifetime.saturating_sub(Duration::from_secs(elapsed)))
}

/// An error with its causes on one line (rmcp's discovery error names the URL; its source
/// says what was wrong there: a body too large, a redirect refused), URLs redacted.
pub(crate) fn reason(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    crate::text::redact_urls(&text)
}

/// The message a call to a server that needs a sign-in answers.
pub fn sign_in_message(server: &str, signed_out: &SignedOut) -> String {
    let again = if signed_out.again { " again" } else { "" };
    format!(
        "server '{server}' needs you to sign in{again}: run `planmux login {server}` ({})",
        signed_out.why
    )
}

#[cfg(test)]
mod tests;
