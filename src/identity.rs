//! Who a request comes from ([`Identity`], as the HTTP front found it) and whose the
//! things a request leaves behind are ([`Owner`]: run records, approval tokens, a plan's
//! state board): a verified caller's, across its sessions, or else one session's.

use std::sync::Arc;

/// Who a request comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The token's subject (for a static `[http] tokens` token: `token:N`, its place in
    /// the list, from 1; empty when the front asks for no token).
    pub sub: String,
    /// The issuer that vouched for it (`[http.auth]`); `None` for a static token or none.
    pub issuer: Option<String>,
    pub email: Option<String>,
    /// From the claim `[http.auth] groups_claim` names (a list, or words).
    pub groups: Vec<String>,
}

impl Identity {
    /// The caller when the front asks for no token.
    pub fn anyone() -> Self {
        Self {
            sub: String::new(),
            issuer: None,
            email: None,
            groups: Vec::new(),
        }
    }

    /// The owner this identity is, when an issuer vouched for it.
    pub fn owner(&self) -> Option<Owner> {
        let issuer = self.issuer.as_ref()?;
        Some(Owner::Caller(format!("{issuer} {}", self.sub).into()))
    }
}

/// Whose something is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Owner {
    /// A host session: stdio's, or an HTTP session whose requests carry no verified
    /// identity.
    Session(u64),
    /// A verified caller (issuer and subject), whichever session or instance it uses.
    Caller(Arc<str>),
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Session(id) => write!(f, "session {id}"),
            Self::Caller(who) => write!(f, "caller {who}"),
        }
    }
}

impl Owner {
    /// The owner as a shared store keeps it (`state.rs`): a caller by its issuer and
    /// subject, the same on every instance; a session also by this process, so that
    /// session 1 of one instance is not session 1 of another.
    pub fn stored(&self) -> String {
        match self {
            Self::Caller(who) => format!("caller {who}"),
            Self::Session(id) => format!("session {}/{id}", process_id()),
        }
    }
}

/// This process's random id, made once.
fn process_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| uuid::Uuid::new_v4().simple().to_string())
}
