//! `[http.auth]`: the HTTP front as an OAuth 2.1 resource server. A request's bearer
//! token is a JWT its issuer signed: the signature is checked with a key of the issuer's
//! JWKS (found through the issuer's metadata, kept, and fetched again when a token names
//! a key planmux does not have, at most every [`REFRESH_EVERY`]), then `iss`, `aud`,
//! `exp` and `nbf`, and only asymmetric algorithms are accepted (never `none`, never an
//! HMAC, whose key would be the public one). What the token says of its holder is the
//! request's [`Identity`]. Fetching keys fails closed: no key, no entry.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;
use tokio::sync::Mutex;

use crate::config::HttpAuth;
pub use crate::identity::Identity;

/// The algorithms a token may be signed with: asymmetric ones only.
const ALLOWED: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];
/// The keys are fetched again for an unknown key id at most this often (a token naming
/// made-up keys must not make planmux hammer the issuer).
pub const REFRESH_EVERY: Duration = Duration::from_secs(30);
/// How long a fetch from the issuer may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Clock difference allowed for `exp` and `nbf`.
const LEEWAY_S: u64 = 5;
/// Largest metadata or key set read from the issuer.
const MAX_DOCUMENT: usize = 1 << 20;

/// Why a request's token is not accepted.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The token is wrong: the client should get another (401).
    #[error("{0}")]
    Token(String),
    /// planmux cannot check tokens now (the issuer's keys are out of reach): 503.
    #[error("{0}")]
    Unavailable(String),
}

/// Checks tokens against one issuer.
pub struct Verifier {
    auth: HttpAuth,
    http: reqwest::Client,
    keys: Mutex<Keys>,
}

/// The issuer's keys as last fetched.
#[derive(Default)]
struct Keys {
    by_id: HashMap<String, (DecodingKey, Option<Algorithm>)>,
    /// Keys without an id, tried in turn.
    unnamed: Vec<(DecodingKey, Option<Algorithm>)>,
    fetched: Option<Instant>,
}

impl Verifier {
    pub fn new(auth: HttpAuth) -> Self {
        // TLS is rustls with ring, the process's provider (as for HTTP servers).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .unwrap_or_default();
        Self {
            auth,
            http,
            keys: Mutex::default(),
        }
    }

    /// The settings it checks by.
    pub fn auth(&self) -> &HttpAuth {
        &self.auth
    }

    /// Fetches the issuer's keys now (at start: a wrong issuer shows at once).
    pub async fn prepare(&self) -> Result<(), Refused> {
        let mut keys = self.keys.lock().await;
        self.refresh(&mut keys).await
    }

    /// The holder of `token`, or why it is refused.
    pub async fn check(&self, token: &str) -> Result<Identity, Refused> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| {
            Refused::Token(format!(
                "the bearer token is not a JWT planmux accepts ({e})"
            ))
        })?;
        if !ALLOWED.contains(&header.alg) {
            return Err(Refused::Token(format!(
                "the token is signed with {:?}, which planmux does not accept (only RSA, RSA-PSS, ECDSA and EdDSA)",
                header.alg
            )));
        }
        let keys = self.keys_for(header.kid.as_deref()).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.auth.issuer]);
        validation.set_audience(&[&self.auth.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_S;
        let mut last = None;
        for (key, alg) in keys {
            if alg.is_some_and(|alg| alg != header.alg) {
                continue;
            }
            match jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key, &validation) {
                Ok(data) => return Ok(self.identity(&data.claims)),
                Err(e) => last = Some(e),
            }
        }
        Err(Refused::Token(match last {
            Some(e) => format!("the token is not valid here: {}", refusal(&e)),
            None => "no key of the issuer fits the token's algorithm".to_owned(),
        }))
    }

    /// What the claims say of the holder.
    fn identity(&self, claims: &serde_json::Map<String, Value>) -> Identity {
        let text = |key: &str| claims.get(key).and_then(Value::as_str).map(str::to_owned);
        let groups = match claims.get(&self.auth.groups_claim) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(Value::String(words)) => words.split_whitespace().map(str::to_owned).collect(),
            _ => Vec::new(),
        };
        Identity {
            sub: text("sub").unwrap_or_default(),
            issuer: Some(self.auth.issuer.clone()),
            email: text("email"),
            groups,
        }
    }

    /// The keys that may have signed a token naming `kid`: fetched again once when none
    /// is known by that id (and the last fetch is old enough).
    async fn keys_for(
        &self,
        kid: Option<&str>,
    ) -> Result<Vec<(DecodingKey, Option<Algorithm>)>, Refused> {
        let mut keys = self.keys.lock().await;
        let stale = keys.fetched.is_none_or(|at| at.elapsed() >= REFRESH_EVERY);
        let known = |keys: &Keys| match kid {
            Some(kid) => keys.by_id.get(kid).map(|key| vec![key.clone()]),
            None => {
                let all: Vec<_> = keys.by_id.values().chain(&keys.unnamed).cloned().collect();
                (!all.is_empty()).then_some(all)
            }
        };
        if let Some(found) = known(&keys) {
            return Ok(found);
        }
        if !stale {
            return Err(unknown_key(kid));
        }
        self.refresh(&mut keys).await?;
        known(&keys).ok_or_else(|| unknown_key(kid))
    }

    /// The issuer's keys, fetched: its metadata names its JWKS.
    async fn refresh(&self, keys: &mut Keys) -> Result<(), Refused> {
        // Counted as a fetch even when it fails: a failing issuer is not asked at every
        // request either.
        keys.fetched = Some(Instant::now());
        let metadata = self.metadata().await?;
        let jwks_uri = metadata
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or_else(|| unavailable("the issuer's metadata names no jwks_uri"))?;
        let set: JwkSet = serde_json::from_value(self.fetch(jwks_uri).await?)
            .map_err(|e| unavailable(&format!("the issuer's JWKS is not a key set: {e}")))?;
        let (mut by_id, mut unnamed) = (HashMap::new(), Vec::new());
        for jwk in &set.keys {
            let Ok(key) = DecodingKey::from_jwk(jwk) else {
                continue;
            };
            let alg = jwk
                .common
                .key_algorithm
                .and_then(|a| a.to_string().parse::<Algorithm>().ok());
            match &jwk.common.key_id {
                Some(kid) => {
                    by_id.insert(kid.clone(), (key, alg));
                }
                None => unnamed.push((key, alg)),
            }
        }
        tracing::info!(issuer = %self.auth.issuer, keys = by_id.len() + unnamed.len(), "fetched the issuer's signing keys");
        keys.by_id = by_id;
        keys.unnamed = unnamed;
        Ok(())
    }

    /// The issuer's authorization server metadata (RFC 8414), else its OpenID
    /// configuration; either must name the issuer itself.
    async fn metadata(&self) -> Result<serde_json::Map<String, Value>, Refused> {
        let issuer = self.auth.issuer.trim_end_matches('/');
        let (origin, path) = split_origin(issuer);
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{issuer}/.well-known/openid-configuration"),
        ];
        let mut why = String::new();
        for url in candidates {
            match self.fetch(&url).await {
                Ok(Value::Object(metadata)) => {
                    let named = metadata.get("issuer").and_then(Value::as_str);
                    if named.map(|n| n.trim_end_matches('/')) != Some(issuer) {
                        return Err(unavailable(&format!(
                            "{url} names another issuer ({}) than [http.auth] issuer",
                            named.unwrap_or("none")
                        )));
                    }
                    return Ok(metadata);
                }
                Ok(_) => why = format!("{url} is not a JSON object"),
                Err(e) => why = e.to_string(),
            }
        }
        Err(unavailable(&format!(
            "the issuer's metadata could not be read: {why}"
        )))
    }

    /// A JSON document from the issuer.
    async fn fetch(&self, url: &str) -> Result<Value, Refused> {
        let shown = crate::text::redact_url(url);
        let response = self
            .http
            .get(url)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| {
                unavailable(&format!(
                    "{shown}: {}",
                    crate::text::redact_urls(&e.to_string())
                ))
            })?;
        if !response.status().is_success() {
            return Err(unavailable(&format!(
                "{shown} answered {}",
                response.status()
            )));
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| unavailable(&format!("{shown}: {e}")))?;
        if body.len() > MAX_DOCUMENT {
            return Err(unavailable(&format!("{shown} is larger than 1 MiB")));
        }
        serde_json::from_slice(&body).map_err(|e| unavailable(&format!("{shown} is not JSON: {e}")))
    }
}

/// `https://host:port` and the rest of `url` (its path, if any).
fn split_origin(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => url.split_at(after_scheme + i),
        None => (url, ""),
    }
}

/// The URL of planmux's protected resource metadata for `audience` (RFC 9728: the
/// well-known path inserted before the resource's path), on the resource's own origin.
pub fn resource_metadata_url(audience: &str) -> String {
    let (origin, path) = split_origin(audience.trim_end_matches('/'));
    format!("{origin}/.well-known/oauth-protected-resource{path}")
}

/// The protected resource metadata document (RFC 9728).
pub fn resource_metadata(auth: &HttpAuth) -> Value {
    serde_json::json!({
        "resource": auth.audience,
        "authorization_servers": [auth.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "planmux",
    })
}

fn unavailable(why: &str) -> Refused {
    Refused::Unavailable(format!("planmux cannot check tokens now: {why}"))
}

fn unknown_key(kid: Option<&str>) -> Refused {
    Refused::Token(match kid {
        Some(kid) => format!(
            "the token names a signing key the issuer does not publish ({})",
            crate::text::clip(kid, 40)
        ),
        None => "the issuer publishes no signing key".to_owned(),
    })
}

/// A token's failed check, in words.
fn refusal(error: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::ExpiredSignature => "it has expired (exp)".into(),
        ErrorKind::ImmatureSignature => "it is not valid yet (nbf)".into(),
        ErrorKind::InvalidIssuer => "it was issued by another issuer (iss)".into(),
        ErrorKind::InvalidAudience => "it is for another audience (aud)".into(),
        ErrorKind::InvalidSignature => "its signature does not verify".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("it has no '{claim}' claim"),
        ErrorKind::InvalidAlgorithm => "its algorithm does not fit the key".into(),
        ErrorKind::Base64(_) | ErrorKind::Json(_) | ErrorKind::Utf8(_) => {
            "it is not a well-formed JWT".into()
        }
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use jsonwebtoken::{EncodingKey, Header};
    use ring::signature::KeyPair;
    use serde_json::json;

    use super::*;

    const ISSUER: &str = "https://idp.example.com";
    const AUDIENCE: &str = "https://pm.example.com/mcp";

    /// A verifier whose issuer has one Ed25519 key, `kid` "k1", and that key to sign with.
    fn issuer() -> (Verifier, EncodingKey) {
        let random = ring::rand::SystemRandom::new();
        let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&random).expect("a key");
        let pair = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("a key");
        let public = DecodingKey::from_ed_der(pair.public_key().as_ref());
        let verifier = Verifier::new(HttpAuth {
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            groups_claim: "groups".into(),
        });
        let keys = Keys {
            by_id: HashMap::from([("k1".to_owned(), (public, Some(Algorithm::EdDSA)))]),
            unnamed: Vec::new(),
            fetched: Some(Instant::now()),
        };
        *verifier.keys.try_lock().expect("unlocked") = keys;
        (verifier, EncodingKey::from_ed_der(pkcs8.as_ref()))
    }

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    }

    /// A token signed with `key`, of these claims over good ones.
    fn token(key: &EncodingKey, claims: Value) -> String {
        let mut all = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now() + 300});
        for (k, v) in claims.as_object().into_iter().flatten() {
            all[k] = v.clone();
        }
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some("k1".into());
        jsonwebtoken::encode(&header, &all, key).expect("signed")
    }

    fn refused(result: Result<Identity, Refused>) -> String {
        match result {
            Err(Refused::Token(why)) => why,
            other => format!("not refused as a token: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_good_token_names_its_holder_and_a_bad_one_says_why() {
        let (verifier, key) = issuer();
        let good = token(&key, json!({"email": "a@x", "groups": ["platform", "ops"]}));
        let identity = verifier.check(&good).await.expect("accepted");
        assert_eq!(identity.sub, "alice");
        assert_eq!(identity.email.as_deref(), Some("a@x"));
        assert_eq!(identity.groups, ["platform", "ops"]);
        let words = token(&key, json!({"groups": "dev qa"}));
        assert_eq!(
            verifier.check(&words).await.expect("accepted").groups,
            ["dev", "qa"]
        );
        for (claims, why) in [
            (json!({"exp": now() - 120}), "expired"),
            (json!({"nbf": now() + 120}), "not valid yet"),
            (
                json!({"iss": "https://other.example.com"}),
                "another issuer",
            ),
            (
                json!({"aud": "https://other.example.com/mcp"}),
                "another audience",
            ),
        ] {
            let said = refused(verifier.check(&token(&key, claims)).await);
            assert!(said.contains(why), "{said}");
        }
        let no_sub = {
            let mut header = Header::new(Algorithm::EdDSA);
            header.kid = Some("k1".into());
            let claims = json!({"iss": ISSUER, "aud": AUDIENCE, "exp": now() + 300});
            jsonwebtoken::encode(&header, &claims, &key).expect("signed")
        };
        assert!(refused(verifier.check(&no_sub).await).contains("'sub'"));
        // Another key's signature.
        let (_, other) = issuer();
        let forged = token(&other, json!({}));
        assert!(refused(verifier.check(&forged).await).contains("signature"));
    }

    #[tokio::test]
    async fn unsigned_and_hmac_tokens_and_unknown_keys_are_refused() {
        let (verifier, key) = issuer();
        let good = token(&key, json!({}));
        let payload = good.split('.').nth(1).unwrap_or_default();
        // alg "none": base64url of {"alg":"none","typ":"JWT"}.
        let none = format!("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{payload}.");
        let said = refused(verifier.check(&none).await);
        assert!(said.contains("not a JWT planmux accepts"), "{said}");
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k1".into());
        let claims = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": now() + 300});
        let hmac = jsonwebtoken::encode(&header, &claims, &EncodingKey::from_secret(b"k"));
        let said = refused(verifier.check(&hmac.expect("signed")).await);
        assert!(said.contains("does not accept"), "{said}");
        // A key id the issuer does not publish: not fetched again within REFRESH_EVERY.
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some("k9".into());
        let claims = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": now() + 300});
        let unknown = jsonwebtoken::encode(&header, &claims, &key).expect("signed");
        let said = refused(verifier.check(&unknown).await);
        assert!(said.contains("does not publish"), "{said}");
        assert!(refused(verifier.check("garbage").await).contains("not a JWT"));
    }

    #[test]
    fn metadata_urls_keep_the_path_after_the_well_known_part() {
        assert_eq!(
            resource_metadata_url("https://pm.example.com/mcp"),
            "https://pm.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            resource_metadata_url("http://127.0.0.1:8787"),
            "http://127.0.0.1:8787/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            split_origin("https://idp.example.com/tenant/1"),
            ("https://idp.example.com", "/tenant/1")
        );
    }
}
