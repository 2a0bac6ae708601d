//! Where a server's sign-in is kept: one JSON file per server and URL in planmux's data
//! folder (`$XDG_DATA_HOME/planmux/oauth`, else `~/.local/share/planmux/oauth`), the
//! folder 0700 and each file 0600, written whole (a temporary file renamed over it) under
//! a lock, so two planmux processes never see half a file nor lose each other's writes.
//! A second lock is the refresh guard rmcp holds across a token refresh: one process
//! refreshes, the other then reads the new token.
//!
//! Where the OS has a keychain (`keychain.rs`), a record's secrets (the token response, a
//! registered client's secret) are kept there, one item per record, and its file says so
//! (`in_keychain`); the rest of it, the file, still carries the lock and the stamp.
//!
//! A record is bound to its server's URL (the resource): another URL under the same name
//! is another file, and a record whose `resource` differs is ignored. rmcp binds the
//! tokens to their issuer (it drops them when the server's authorization server changes).

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use nix::fcntl::{Flock, FlockArg};
use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, OAuthTokenResponse, StoredCredentials,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::keychain::Keychain;

/// The longest a lock is waited for: another planmux refreshing takes one token request
/// (rmcp bounds it at 30 s); past this, something is stuck and the caller is told.
const LOCK_WAIT: Duration = Duration::from_secs(40);
/// A record larger than this is not planmux's: refused rather than read.
const MAX_RECORD_BYTES: u64 = 1 << 20;

/// What is kept of one server's sign-in.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct Record {
    /// The server's name in servers.toml, for a person reading the folder.
    pub server: String,
    /// The server's URL: the resource the tokens are for.
    pub resource: String,
    /// rmcp's credentials: the client id, the token response, scopes, issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<StoredCredentials>,
    /// The client planmux registered dynamically, reused while its redirect URI and
    /// issuer still match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration: Option<Registration>,
    /// Scopes the server asked for beyond those granted (insufficient_scope): the next
    /// sign-in asks for them too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wanted_scopes: Vec<String>,
    /// The server's last `WWW-Authenticate` challenge to planmux (where its metadata is,
    /// which scope it wants), for the next sign-in when the server does not challenge
    /// an unauthenticated `initialize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenge: Option<String>,
    /// Whether its secrets are in the OS keychain rather than in this file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_keychain: bool,
    /// Why the tokens no longer work (a refused refresh), until the next sign-in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_out: Option<String>,
}

/// A dynamically registered client.
#[derive(Clone, Serialize, Deserialize)]
pub struct Registration {
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub redirect_uri: String,
    pub issuer: Option<String>,
    /// The scopes it was registered with.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// A record's secrets, as the keychain keeps them.
#[derive(Default, Serialize, Deserialize)]
struct Secrets {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_response: Option<OAuthTokenResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
}

impl Secrets {
    /// The secrets of `record`, taken out of it.
    fn take(record: &mut Record) -> Secrets {
        Secrets {
            token_response: (record.credentials.as_mut()).and_then(|c| c.token_response.take()),
            client_secret: (record.registration.as_mut()).and_then(|r| r.client_secret.take()),
        }
    }

    /// Puts them back into `record`.
    fn restore(self, record: &mut Record) {
        if let Some(credentials) = record.credentials.as_mut() {
            credentials.token_response = self.token_response;
        }
        if let Some(registration) = record.registration.as_mut() {
            registration.client_secret = self.client_secret;
        }
    }

    fn is_empty(&self) -> bool {
        self.token_response.is_none() && self.client_secret.is_none()
    }
}

/// Where a store keeps a record's secrets.
#[derive(Clone)]
enum SecretsIn {
    /// The OS keychain when there is one, else the record's file.
    System,
    /// This keychain (tests).
    Given(Keychain),
    /// The record's file.
    File,
}

/// One server's sign-in on disk: rmcp's credential store for it.
#[derive(Clone)]
pub struct Store {
    server: String,
    resource: String,
    path: PathBuf,
    /// Where its secrets go.
    keychain: SecretsIn,
}

impl Store {
    /// The store of server `server` at `url`, in the data folder.
    pub fn new(server: &str, url: &str) -> Result<Self, String> {
        let mut store = Self::in_folder(&folder()?, server, url);
        store.keychain = SecretsIn::System;
        Ok(store)
    }

    /// The store with its secrets in `keychain` (tests give a mock one).
    pub fn with_keychain(mut self, keychain: Keychain) -> Self {
        self.keychain = SecretsIn::Given(keychain);
        self
    }

    /// The keychain its secrets go to, if any (the OS's is looked for only when a secret
    /// is read or written: a stamp or a lock never waits for it).
    fn keychain(&self) -> Option<Keychain> {
        match &self.keychain {
            SecretsIn::System => Keychain::system(),
            SecretsIn::Given(keychain) => Some(keychain.clone()),
            SecretsIn::File => None,
        }
    }

    /// The record's keychain item: its file's name.
    fn account(&self) -> String {
        self.path
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The store in `folder` (tests use their own).
    pub fn in_folder(folder: &Path, server: &str, url: &str) -> Self {
        let digest = Sha256::digest(url.as_bytes());
        let hash: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        Self {
            server: server.to_owned(),
            resource: url.to_owned(),
            path: folder.join(format!("{server}-{hash}.json")),
            keychain: SecretsIn::File,
        }
    }

    /// The record's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The record, or an empty one when there is none (or it is for another URL).
    pub fn read(&self) -> Result<Record, String> {
        let empty = Record {
            server: self.server.clone(),
            resource: self.resource.clone(),
            ..Record::default()
        };
        let file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(empty),
            Err(e) => return Err(format!("cannot read {}: {e}", self.path.display())),
        };
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        if size > MAX_RECORD_BYTES {
            return Err(format!(
                "{} is {size} bytes: not a sign-in record",
                self.path.display()
            ));
        }
        let record: Record =
            serde_json::from_reader(std::io::BufReader::new(file)).map_err(|e| {
                format!(
                    "{} is damaged ({e}): run `planmux logout {}` and sign in again",
                    self.path.display(),
                    self.server
                )
            })?;
        if record.resource != self.resource {
            return Ok(empty);
        }
        self.with_secrets(record)
    }

    /// `record` with its secrets back from the keychain, when they are there.
    fn with_secrets(&self, mut record: Record) -> Result<Record, String> {
        if !record.in_keychain {
            return Ok(record);
        }
        let Some(keychain) = self.keychain() else {
            return Err(format!(
                "the sign-in of '{}' is in the OS keychain, which planmux cannot reach now (no desktop session, or PLANMUX_KEYCHAIN=off): sign in again with `planmux login {}`",
                self.server, self.server
            ));
        };
        let kept = keychain.get(&self.account()).map_err(|e| {
            format!(
                "cannot read the sign-in of '{}' from the OS keychain: {e}",
                self.server
            )
        })?;
        if let Some(text) = kept {
            let secrets: Secrets = serde_json::from_str(&text).map_err(|e| {
                format!("the keychain item of '{}' is damaged ({e}): run `planmux logout {}` and sign in again", self.server, self.server)
            })?;
            secrets.restore(&mut record);
        }
        record.in_keychain = false;
        Ok(record)
    }

    /// Changes the record under the write lock: read, `change`, written whole.
    pub fn update(&self, change: impl FnOnce(&mut Record)) -> Result<(), String> {
        let _lock = self.lock("lock")?;
        let mut record = self.read()?;
        change(&mut record);
        self.write(&record)
    }

    /// Removes the record (logout), and its keychain item; whether there was one.
    pub fn remove(&self) -> Result<bool, String> {
        let _lock = self.lock("lock")?;
        if let Some(keychain) = self.keychain() {
            keychain.delete(&self.account())?;
        }
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(format!("cannot remove {}: {e}", self.path.display())),
        }
    }

    /// When the record last changed: a new sign-in in another process shows here.
    pub fn stamp(&self) -> Option<SystemTime> {
        std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok()
    }

    fn write(&self, record: &Record) -> Result<(), String> {
        let mut on_disk = record.clone();
        if let Some(keychain) = self.keychain() {
            let secrets = Secrets::take(&mut on_disk);
            let account = self.account();
            let kept = if secrets.is_empty() {
                keychain.delete(&account)
            } else {
                let text = serde_json::to_string(&secrets).map_err(|e| e.to_string())?;
                keychain.set(&account, &text)
            };
            match kept {
                Ok(()) => on_disk.in_keychain = !secrets.is_empty(),
                Err(e) => {
                    // The file is the user's alone: better there than lost.
                    tracing::warn!(server = %self.server, error = %e, "the OS keychain refused the sign-in: it is kept in its file");
                    on_disk = record.clone();
                }
            }
        }
        let text = serde_json::to_vec_pretty(&on_disk).map_err(|e| e.to_string())?;
        let temporary = self.path.with_extension("json.tmp");
        let failed = |e: std::io::Error| format!("cannot write {}: {e}", self.path.display());
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)
            .map_err(failed)?;
        // A file left by an older planmux or another tool may have wider permissions.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(failed)?;
        file.write_all(&text).map_err(failed)?;
        file.sync_all().map_err(failed)?;
        std::fs::rename(&temporary, &self.path).map_err(failed)
    }

    /// An exclusive lock on the record's `suffix` lock file, waited for within
    /// [`LOCK_WAIT`].
    fn lock(&self, suffix: &str) -> Result<Flock<File>, String> {
        let path = self.path.with_extension(suffix);
        let deadline = Instant::now() + LOCK_WAIT;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(lock),
                Err((back, nix::errno::Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                    file = back;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err((_, e)) => {
                    return Err(format!(
                        "cannot lock {} (another planmux holds it?): {e}",
                        path.display()
                    ));
                }
            }
        }
    }
}

/// planmux's sign-in folder, made (0700) if missing.
pub fn folder() -> Result<PathBuf, String> {
    let base = crate::dirs::base("XDG_DATA_HOME", ".local/share")
        .ok_or("neither XDG_DATA_HOME nor HOME is set: planmux has nowhere to keep sign-ins")?;
    let folder = base.join("planmux").join("oauth");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&folder)
        .map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
    Ok(folder)
}

fn store_error(message: String) -> AuthError {
    AuthError::CredentialStoreError(message)
}

/// Runs blocking file work off the runtime's thread.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, AuthError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| store_error(e.to_string()))?
        .map_err(store_error)
}

#[async_trait::async_trait]
impl CredentialStore for Store {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let store = self.clone();
        blocking(move || Ok(store.read()?.credentials)).await
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let store = self.clone();
        blocking(move || {
            store.update(|record| {
                record.credentials = Some(credentials);
                record.signed_out = None;
            })
        })
        .await
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let store = self.clone();
        blocking(move || store.update(|record| record.credentials = None)).await
    }

    async fn on_refresh_token_rejected(
        &self,
        credentials: &StoredCredentials,
    ) -> Result<(), AuthError> {
        let store = self.clone();
        let received = credentials.token_received_at;
        blocking(move || {
            store.update(|record| {
                // Only if no sign-in replaced them meanwhile.
                let same = record
                    .credentials
                    .as_ref()
                    .is_some_and(|c| c.token_received_at == received);
                if same {
                    record.signed_out =
                        Some("its authorization server refused to renew the sign-in".into());
                }
            })
        })
        .await
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        // rmcp holds the guard across each refresh of the sign-in's token.
        crate::metrics::token_refreshed(&self.server);
        let store = self.clone();
        let lock = blocking(move || store.lock("refresh.lock")).await?;
        Ok(Some(CredentialRefreshGuard::new(lock)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(client: &str) -> StoredCredentials {
        StoredCredentials::new(client.into(), None, vec!["read".into()], Some(1))
    }

    #[tokio::test]
    async fn kept_per_server_and_url_readable_only_by_the_user() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = Store::in_folder(dir.path(), "linear", "https://a/mcp");
        assert!(store.load().await.ok().flatten().is_none());
        assert!(store.save(credentials("c1")).await.is_ok());
        let loaded = store.load().await.ok().flatten().map(|c| c.client_id);
        assert_eq!(loaded.as_deref(), Some("c1"));
        let mode = std::fs::metadata(store.path()).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode.ok(), Some(0o600));
        // Another URL under the same name is another record.
        let moved = Store::in_folder(dir.path(), "linear", "https://b/mcp");
        assert!(moved.load().await.ok().flatten().is_none());
        assert!(store.clear().await.is_ok());
        assert!(store.load().await.ok().flatten().is_none());
        assert_eq!(store.remove(), Ok(true));
        assert_eq!(store.remove(), Ok(false));
    }

    #[tokio::test]
    async fn a_refused_refresh_signs_out_only_the_tokens_it_was_for() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = Store::in_folder(dir.path(), "s", "https://a/mcp");
        assert!(store.save(credentials("c1")).await.is_ok());
        let stale = StoredCredentials::new("c1".into(), None, vec![], Some(0));
        assert!(store.on_refresh_token_rejected(&stale).await.is_ok());
        assert!(store.read().map(|r| r.signed_out).ok().flatten().is_none());
        assert!(
            store
                .on_refresh_token_rejected(&credentials("c1"))
                .await
                .is_ok()
        );
        assert!(store.read().map(|r| r.signed_out).ok().flatten().is_some());
        // A new sign-in clears it.
        assert!(store.save(credentials("c2")).await.is_ok());
        assert!(store.read().map(|r| r.signed_out).ok().flatten().is_none());
    }

    #[tokio::test]
    async fn the_refresh_guard_excludes_a_second_holder() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = Store::in_folder(dir.path(), "s", "https://a/mcp");
        let held = store.acquire_refresh_guard().await;
        assert!(matches!(held, Ok(Some(_))));
        // The same lock taken through another open file (as another process would) waits.
        let path = store.path().with_extension("refresh.lock");
        let other = File::options()
            .write(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(Flock::lock(other, FlockArg::LockExclusiveNonblock).is_err());
        drop(held);
        let other = File::options()
            .write(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(Flock::lock(other, FlockArg::LockExclusiveNonblock).is_ok());
    }

    /// With a keychain, the file holds no secret; the record reads back whole, and a
    /// process without the keychain is told where the sign-in is rather than signed out.
    #[tokio::test]
    async fn with_a_keychain_the_secrets_leave_the_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mock = keyring_core::mock::Store::new().unwrap_or_else(|e| panic!("{e}"));
        let keychain = Keychain::of(mock);
        let store =
            Store::in_folder(dir.path(), "s", "https://a/mcp").with_keychain(keychain.clone());
        let token: OAuthTokenResponse = serde_json::from_value(serde_json::json!({
            "access_token": "at-secret", "token_type": "Bearer", "refresh_token": "rt-secret",
            "expires_in": 60
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let credentials =
            StoredCredentials::new("c1".into(), Some(token), vec!["read".into()], Some(1));
        assert!(store.save(credentials).await.is_ok());
        let registered = store.update(|record| {
            record.registration = Some(Registration {
                client_id: "c1".into(),
                client_secret: Some("cs-secret".into()),
                redirect_uri: "http://127.0.0.1:1/callback".into(),
                issuer: None,
                scopes: vec![],
            })
        });
        assert_eq!(registered, Ok(()));
        let file = std::fs::read_to_string(store.path()).unwrap_or_default();
        for secret in ["at-secret", "rt-secret", "cs-secret"] {
            assert!(!file.contains(secret), "{secret} in {file}");
        }
        assert!(file.contains("\"in_keychain\": true"), "{file}");
        let item = keychain.get(&store.account()).unwrap_or_default();
        assert!(
            item.is_some_and(|i| i.contains("at-secret")),
            "one item, named as the file"
        );
        let back = store.read().unwrap_or_else(|e| panic!("{e}"));
        let token = back.credentials.and_then(|c| c.token_response);
        let token = serde_json::to_value(token).unwrap_or_default();
        assert_eq!(token["access_token"], "at-secret");
        let secret = back.registration.and_then(|r| r.client_secret);
        assert_eq!(secret.as_deref(), Some("cs-secret"));
        // Without the keychain: an error that says where the sign-in is.
        let elsewhere = Store::in_folder(dir.path(), "s", "https://a/mcp");
        let error = elsewhere.read().err().unwrap_or_default();
        assert!(error.contains("OS keychain"), "{error}");
        // Logout forgets the item too.
        assert_eq!(store.remove(), Ok(true));
        assert_eq!(keychain.get(&store.account()), Ok(None));
    }

    #[test]
    fn a_damaged_record_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = Store::in_folder(dir.path(), "s", "https://a/mcp");
        assert!(std::fs::write(store.path(), "{").is_ok());
        let error = store.read().err().unwrap_or_default();
        assert!(error.contains("run `planmux logout s`"), "{error}");
    }
}
