//! `planmux login`: a user signs in to one server in a browser. planmux asks the server
//! (an unauthenticated `initialize`) for its challenge, discovers its authorization server
//! (rmcp: RFC 9728 and RFC 8414 / OIDC), picks who it is to that server (the configured
//! client, its client metadata document, a registration it made before for the same
//! redirect URI and issuer, else a new dynamic registration), listens on a loopback port
//! for the redirect, opens the browser (`$BROWSER`, else `xdg-open` / `open`) or prints the
//! URL, and trades the code for tokens (rmcp: PKCE, `resource`, `iss` checked). The tokens
//! go to the server's store; nothing secret is printed.

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::transport::auth::{AuthorizationRequest, AuthorizationSession};
use tokio::net::TcpListener;

use super::callback::{self, query_value};
use super::client::manager;
use super::probe::{Probe, probe};
use super::store::{Registration, Store};
use crate::config::{BrowserClient, ServerConfig, SignIn, Transport};

/// How long `planmux login` waits for the browser by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the server's first answer (its challenge) may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a browser opener may run once the sign-in is over before it is stopped.
const OPENER_GRACE: Duration = Duration::from_secs(5);

/// What the user asked of `planmux login`.
pub struct Options {
    /// Open the browser (else only print the URL).
    pub open_browser: bool,
    /// How long to wait for the browser.
    pub timeout: Duration,
}

/// A finished sign-in, for the user.
pub struct SignedIn {
    pub issuer: Option<String>,
    pub scopes: Vec<String>,
}

/// Signs in to `server`. `say` shows the user a line (the URL to open).
pub async fn login(
    server: &ServerConfig,
    options: &Options,
    say: &mut dyn FnMut(&str),
) -> Result<SignedIn, String> {
    // reqwest (rustls without a provider of its own, Cargo.toml) panics when it builds a
    // client before the process has a crypto provider, even for http://: `planmux login`
    // builds its clients before any server transport installs one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    login_into(server, None, options, say).await
}

/// [`login`], keeping the sign-in in `folder` instead of the data folder (tests).
pub(super) async fn login_into(
    server: &ServerConfig,
    folder: Option<&std::path::Path>,
    options: &Options,
    say: &mut dyn FnMut(&str),
) -> Result<SignedIn, String> {
    let pending = begin(server, folder).await?;
    let name = &server.name;
    say(&format!(
        "To sign in to '{name}', open:\n  {}",
        pending.url()
    ));
    let mut opener = if options.open_browser {
        open(pending.url(), say)
    } else {
        None
    };
    let outcome = pending.finish(options.timeout).await;
    if let Some(child) = opener.as_mut()
        && tokio::time::timeout(OPENER_GRACE, child.wait())
            .await
            .is_err()
    {
        let _ = child.kill().await;
    }
    outcome
}

/// A sign-in under way: the URL the user opens, and the listener its redirect comes to.
pub struct Pending {
    name: String,
    store: Store,
    session: AuthorizationSession,
    listener: TcpListener,
    state: String,
    auth_url: String,
}

/// Prepares the sign-in to `server` up to the URL the user opens (`folder`: where the
/// sign-in is kept, else the data folder).
pub async fn begin(
    server: &ServerConfig,
    folder: Option<&std::path::Path>,
) -> Result<Pending, String> {
    let name = &server.name;
    let (url, headers, configured) = match &server.transport {
        Transport::Http {
            url,
            headers,
            sign_in: SignIn::Browser(client),
        } => (url, headers, client),
        Transport::Http {
            sign_in: SignIn::Header,
            ..
        } => {
            return Err(format!(
                "server '{name}' signs in with its Authorization header (servers.toml), not OAuth"
            ));
        }
        Transport::Http {
            sign_in: SignIn::ClientCredentials { .. },
            ..
        } => {
            return Err(format!(
                "server '{name}' signs in by itself with client credentials: there is nothing to log in to"
            ));
        }
        _ => {
            return Err(format!(
                "server '{name}' is not a remote (url) server: it needs no sign-in"
            ));
        }
    };
    let store = match folder {
        Some(folder) => Store::in_folder(folder, name, url),
        None => Store::new(name, url)?,
    };
    let record = store.read()?;
    // The server's challenge now, else the last one it gave a running planmux (some
    // servers let `initialize` through and challenge later calls).
    let challenge = challenge(url, headers).await?.or(record.challenge.clone());
    let mut manager = manager(url).await.map_err(|e| e.to_string())?;
    manager.set_credential_store(store.clone());
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await
        .map_err(|e| {
            format!(
                "cannot find its authorization server: {}",
                super::reason(&e)
            )
        })?;
    let metadata = resolution.metadata;
    let issuer = metadata.issuer.clone();
    let cimd = metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    manager.set_metadata(metadata);

    // A step-up asks for what was granted and what the server wants more.
    let granted = match &record.credentials {
        Some(credentials) if !record.wanted_scopes.is_empty() => credentials.granted_scopes.clone(),
        _ => Vec::new(),
    };
    let mut scopes = configured.scopes.clone();
    for scope in granted.iter().chain(&record.wanted_scopes) {
        if !scopes.contains(scope) {
            scopes.push(scope.clone());
        }
    }
    if scopes.is_empty() {
        scopes = manager.select_initial_scopes(&[]).await;
    }

    // The redirect URI: the one a kept registration was made for, when its port is free.
    // A registration is kept while its issuer, its redirect URI and its scopes (an
    // authorization server may refuse scopes a client was not registered for) still fit.
    let kept = record.registration.clone().filter(|r| {
        r.issuer == issuer
            && configured.client_id.is_none()
            && scopes.iter().all(|scope| r.scopes.contains(scope))
    });
    let listener = listen(kept.as_ref().and_then(|r| port_of(&r.redirect_uri))).await?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let kept = kept.filter(|r| r.redirect_uri == redirect_uri);
    let mut request = AuthorizationRequest::new(&redirect_uri)
        .with_client_name("planmux")
        .with_application_type("native")
        .with_scopes(scopes.clone());
    let mut registered = None;
    match identity(configured, kept, cimd) {
        Identity::Configured { client_id, secret } | Identity::Kept { client_id, secret } => {
            request = request.with_preregistered_client(client_id);
            if let Some(secret) = secret {
                request = request.with_client_secret(secret);
            }
        }
        Identity::Metadata(url) => request = request.with_client_metadata_url(url),
        Identity::Register => {
            let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
            let config = manager
                .register_client("planmux", &redirect_uri, &scope_refs)
                .await
                .map_err(|e| {
                    let hint = match e {
                        rmcp::transport::auth::AuthError::RegistrationFailed(_) => {
                            " (set client_id in servers.toml if it has a client for you)"
                        }
                        _ => "",
                    };
                    format!(
                        "cannot register planmux with its authorization server: {}{hint}",
                        super::reason(&e)
                    )
                })?;
            request = request.with_preregistered_client(&config.client_id);
            if let Some(secret) = &config.client_secret {
                request = request.with_client_secret(secret);
            }
            registered = Some(Registration {
                client_id: config.client_id,
                client_secret: config.client_secret,
                redirect_uri: redirect_uri.clone(),
                issuer: issuer.clone(),
                scopes: scopes.clone(),
            });
        }
    }
    if let Some(registration) = &registered {
        let registration = registration.clone();
        store.update(|record| record.registration = Some(registration))?;
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| format!("cannot start the sign-in: {}", super::reason(&e)))?;
    let auth_url = session.get_authorization_url().to_owned();
    let state = query_value(&auth_url, "state").unwrap_or_default();
    Ok(Pending {
        name: name.clone(),
        store,
        session,
        listener,
        state,
        auth_url,
    })
}

impl Pending {
    /// The authorization URL the user opens (it holds no secret: PKCE's challenge and the
    /// state are public).
    pub fn url(&self) -> &str {
        &self.auth_url
    }

    /// Waits up to `timeout` for the redirect, trades the code for tokens (the issuer and
    /// state checked), and keeps them.
    pub async fn finish(self, timeout: Duration) -> Result<SignedIn, String> {
        let Pending {
            name,
            store,
            session,
            listener,
            state,
            ..
        } = self;
        // Whether the redirect came: a timeout after it is the token request's.
        let arrived = std::sync::atomic::AtomicBool::new(false);
        let exchange = |callback: String| {
            let session = &session;
            let arrived = &arrived;
            async move {
                arrived.store(true, std::sync::atomic::Ordering::Relaxed);
                session
                    .handle_callback_url(&callback)
                    .await
                    .map(|_| ())
                    .map_err(|e| super::reason(&e))
            }
        };
        let outcome =
            tokio::time::timeout(timeout, callback::receive(listener, &state, exchange)).await;
        match outcome {
            Err(_) if arrived.load(std::sync::atomic::Ordering::Relaxed) => Err(format!(
                "the browser came back, but its authorization server did not answer the token request within {} s: run `planmux login {name}` again",
                timeout.as_secs()
            )),
            Err(_) => Err(format!(
                "no sign-in arrived within {} s: run `planmux login {name}` again (if the \
                 authorization server no longer knows planmux's client, `planmux logout \
                 {name}` first makes it register anew)",
                timeout.as_secs()
            )),
            Ok(Err(e)) => Err(format!("sign-in to '{name}' failed: {e}")),
            Ok(Ok(())) => {
                store.update(|record| record.wanted_scopes.clear())?;
                let credentials = store.read()?.credentials;
                Ok(SignedIn {
                    issuer: credentials.as_ref().and_then(|c| c.issuer.clone()),
                    scopes: credentials.map(|c| c.granted_scopes).unwrap_or_default(),
                })
            }
        }
    }
}

/// Who planmux is to the authorization server, in the specification's order.
enum Identity {
    Configured {
        client_id: String,
        secret: Option<String>,
    },
    Metadata(String),
    Kept {
        client_id: String,
        secret: Option<String>,
    },
    Register,
}

fn identity(configured: &BrowserClient, kept: Option<Registration>, cimd: bool) -> Identity {
    if let Some(client_id) = &configured.client_id {
        return Identity::Configured {
            client_id: client_id.clone(),
            secret: configured.client_secret.as_ref().map(|s| s.0.clone()),
        };
    }
    if let Some(url) = configured.client_metadata_url.as_ref().filter(|_| cimd) {
        return Identity::Metadata(url.clone());
    }
    match kept {
        Some(registration) => Identity::Kept {
            client_id: registration.client_id,
            secret: registration.client_secret,
        },
        None => Identity::Register,
    }
}

/// The server's challenge to a client without credentials (`probe`): `None` when it
/// lets one in.
async fn challenge(
    url: &str,
    headers: &BTreeMap<String, String>,
) -> Result<Option<String>, String> {
    match probe(url, headers, PROBE_TIMEOUT).await {
        Probe::SignInAsked(challenge) => Ok(challenge),
        Probe::LetIn => Ok(None),
        Probe::Status(status) => Err(format!(
            "it answered initialize with HTTP {status}, not a sign-in challenge (401)"
        )),
        Probe::NoAnswer(why) => Err(format!(
            "cannot reach {}: {why}",
            crate::text::redact_url(url)
        )),
    }
}

/// A loopback listener on `port` when it is free, else on any free port.
async fn listen(port: Option<u16>) -> Result<TcpListener, String> {
    if let Some(port) = port
        && let Ok(listener) = TcpListener::bind(("127.0.0.1", port)).await
    {
        return Ok(listener);
    }
    TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| format!("cannot listen on a loopback port for the sign-in: {e}"))
}

fn port_of(redirect_uri: &str) -> Option<u16> {
    url::Url::parse(redirect_uri).ok()?.port()
}

/// Opens `url` in the user's browser: `$BROWSER`, else the system's opener. Failing
/// that, the printed URL is the way.
fn open(url: &str, say: &mut dyn FnMut(&str)) -> Option<tokio::process::Child> {
    let opener = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| {
            if cfg!(target_os = "macos") {
                "open".into()
            } else {
                "xdg-open".into()
            }
        });
    let mut words = opener.split_whitespace();
    let program = words.next()?;
    match tokio::process::Command::new(program)
        .args(words)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => Some(child),
        Err(e) => {
            say(&format!(
                "(could not open a browser with '{program}': {e}; open the URL above yourself)"
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn kept() -> Option<Registration> {
        Some(Registration {
            client_id: "kept".into(),
            client_secret: None,
            redirect_uri: "http://127.0.0.1:1/callback".into(),
            issuer: None,
            scopes: Vec::new(),
        })
    }

    /// Which client planmux is, in the specification's order.
    #[test]
    fn the_client_identity_in_order() {
        let configured = BrowserClient {
            client_id: Some("mine".into()),
            client_secret: Some(Secret("s".into())),
            client_metadata_url: Some("https://me.example/c.json".into()),
            ..BrowserClient::default()
        };
        let metadata = BrowserClient {
            client_metadata_url: Some("https://me.example/c.json".into()),
            ..BrowserClient::default()
        };
        let id = |identity: Identity| match identity {
            Identity::Configured { client_id, secret } => {
                format!("configured {client_id} {secret:?}")
            }
            Identity::Metadata(url) => format!("metadata {url}"),
            Identity::Kept { client_id, .. } => format!("kept {client_id}"),
            Identity::Register => "register".into(),
        };
        let cases = [
            (
                identity(&configured, kept(), true),
                "configured mine Some(\"s\")",
            ),
            (
                identity(&metadata, kept(), true),
                "metadata https://me.example/c.json",
            ),
            // A metadata document the authorization server does not accept.
            (identity(&metadata, kept(), false), "kept kept"),
            (identity(&metadata, None, false), "register"),
            (identity(&BrowserClient::default(), None, true), "register"),
        ];
        for (got, want) in cases {
            assert_eq!(id(got), want);
        }
    }

    #[test]
    fn the_redirect_port_and_state() {
        assert_eq!(port_of("http://127.0.0.1:4321/callback"), Some(4321));
        assert_eq!(port_of("not a url"), None);
        let url = "https://as.example/authorize?client_id=c&state=abc%3D&x=1";
        assert_eq!(query_value(url, "state").as_deref(), Some("abc="));
        assert_eq!(query_value(url, "code"), None);
    }
}
