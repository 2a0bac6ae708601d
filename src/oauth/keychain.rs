//! The OS keychain, where there is one, for the secret half of a sign-in (its tokens and
//! a registered client's secret): the login Keychain on macOS, the Secret Service of a
//! Linux desktop session (GNOME Keyring, KWallet) over D-Bus. One item per sign-in,
//! service `planmux`, account the sign-in's file name. Without one (a server, a container,
//! `PLANMUX_KEYCHAIN=off`), the secrets stay in the sign-in's own file, readable only by
//! the user.

use std::sync::{Arc, OnceLock};

use keyring_core::{CredentialStore, Entry, Error};

/// The service name of planmux's keychain items.
const SERVICE: &str = "planmux";

/// A keychain planmux can use.
#[derive(Clone)]
pub struct Keychain {
    store: Arc<CredentialStore>,
}

impl std::fmt::Debug for Keychain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keychain")
    }
}

impl Keychain {
    /// The keychain of `store` (tests give a mock one).
    pub fn of(store: Arc<CredentialStore>) -> Self {
        Self { store }
    }

    /// The OS keychain, if there is one that answers (asked once per process).
    pub fn system() -> Option<Keychain> {
        static SYSTEM: OnceLock<Option<Keychain>> = OnceLock::new();
        SYSTEM
            .get_or_init(|| {
                let keychain = platform()?;
                // One lookup, to learn that it answers (and is unlocked) now.
                match keychain.get("availability-probe") {
                    Ok(_) => Some(keychain),
                    Err(e) => {
                        tracing::info!(reason = %e, "no usable keychain: sign-ins are kept in files");
                        None
                    }
                }
            })
            .clone()
    }

    fn entry(&self, account: &str) -> Result<Entry, String> {
        Entry::new_in_store(&self.store, SERVICE, account).map_err(|e| described(&e))
    }

    /// The secret kept for `account`, if any.
    pub fn get(&self, account: &str) -> Result<Option<String>, String> {
        match self.entry(account)?.get_password() {
            Ok(secret) => Ok(Some(secret)),
            Err(Error::NoEntry) => Ok(None),
            Err(e) => Err(described(&e)),
        }
    }

    /// Keeps `secret` for `account`, replacing what was there.
    pub fn set(&self, account: &str, secret: &str) -> Result<(), String> {
        self.entry(account)?
            .set_password(secret)
            .map_err(|e| described(&e))
    }

    /// Forgets what is kept for `account`.
    pub fn delete(&self, account: &str) -> Result<(), String> {
        match self.entry(account)?.delete_credential() {
            Ok(()) | Err(Error::NoEntry) => Ok(()),
            Err(e) => Err(described(&e)),
        }
    }
}

/// The platform's keychain, unless turned off.
fn platform() -> Option<Keychain> {
    let off = std::env::var("PLANMUX_KEYCHAIN")
        .is_ok_and(|v| matches!(v.trim(), "off" | "0" | "false" | "no"));
    if off {
        return None;
    }
    platform_store().map(Keychain::of)
}

/// The Secret Service, when a desktop session's bus is there to reach it.
#[cfg(target_os = "linux")]
fn platform_store() -> Option<Arc<CredentialStore>> {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS")?;
    match zbus_secret_service_keyring_store::Store::new() {
        Ok(store) => Some(store),
        Err(e) => {
            tracing::info!(reason = %described(&e), "no Secret Service: sign-ins are kept in files");
            None
        }
    }
}

/// The user's login Keychain.
#[cfg(target_os = "macos")]
fn platform_store() -> Option<Arc<CredentialStore>> {
    match apple_native_keyring_store::keychain::Store::new() {
        Ok(store) => Some(store),
        Err(e) => {
            tracing::info!(reason = %described(&e), "no Keychain: sign-ins are kept in files");
            None
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn platform_store() -> Option<Arc<CredentialStore>> {
    None
}

/// A keychain error in a line (never a secret: the errors carry none).
fn described(error: &Error) -> String {
    crate::oauth::reason(error)
}
