//! The front's one door: who a request comes from, by the bearer token it carries (one
//! of `[http] tokens`, compared in constant time, or a JWT `[http.auth]` accepts), for
//! `/mcp`, `/metrics` and the console's sign-in alike.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use super::Body;
use super::auth::{self, Identity, Refused, Verifier};

/// The tokens the front takes.
pub(crate) struct Gate {
    pub(crate) tokens: Vec<String>,
    /// `[http.auth]`: JWTs of an issuer.
    pub(crate) verifier: Option<Arc<Verifier>>,
}

impl Gate {
    /// Whether the front asks for no token (loopback with neither set).
    pub(crate) fn is_open(&self) -> bool {
        self.tokens.is_empty() && self.verifier.is_none()
    }

    /// Who sends the request: the holder of one of `[http] tokens` (`token:N`), or of a
    /// JWT `[http.auth]` accepts; everyone alike (`sub` empty) when neither is set. The
    /// answer to a request without either.
    pub(crate) async fn caller<B>(&self, request: &Request<B>) -> Result<Identity, Response<Body>> {
        if self.is_open() {
            return Ok(Identity::anyone());
        }
        let given = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map_or("", |(_, token)| token.trim());
        self.identify(given).await
    }

    /// Who holds `given` (a static token, or a JWT); the answer to a token refused.
    pub(crate) async fn identify(&self, given: &str) -> Result<Identity, Response<Body>> {
        // Every token compared in full, whatever matched: the time says nothing.
        let listed = self
            .tokens
            .iter()
            .enumerate()
            .fold(None, |found, (i, token)| {
                let same = same(token.as_bytes(), given.as_bytes());
                found.or(same.then_some(i))
            });
        if let Some(i) = listed {
            return Ok(Identity {
                sub: format!("token:{}", i + 1),
                ..Identity::anyone()
            });
        }
        let Some(verifier) = self.verifier.as_ref().filter(|_| !given.is_empty()) else {
            return Err(self.unauthorized(None));
        };
        match verifier.check(given).await {
            Ok(identity) => Ok(identity),
            Err(Refused::Token(why)) => Err(self.unauthorized(Some(&why))),
            Err(Refused::Unavailable(why)) => {
                tracing::warn!(%why, "a request's token could not be checked");
                let mut response = Response::new(Full::new(Bytes::from(why)).boxed());
                *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                Err(response)
            }
        }
    }

    /// 401, saying how to authenticate (and, for a token refused, why).
    pub(crate) fn unauthorized(&self, why: Option<&str>) -> Response<Body> {
        let text = match (why, &self.verifier) {
            (Some(why), _) => format!("the bearer token was refused: {why}"),
            (None, Some(_)) => "a bearer token is required: a JWT of the [http.auth] issuer, or one of [http] tokens".to_owned(),
            (None, None) => "a bearer token is required: Authorization: Bearer <one of [http] tokens>".to_owned(),
        };
        let mut challenge = String::from("Bearer");
        if let Some(verifier) = &self.verifier {
            let url = auth::resource_metadata_url(&verifier.auth().audience);
            challenge.push_str(&format!(" resource_metadata=\"{url}\""));
            if let Some(why) = why {
                let why = why.replace(['"', '\\'], "'");
                challenge.push_str(&format!(
                    ", error=\"invalid_token\", error_description=\"{why}\""
                ));
            }
        }
        let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        if let Ok(value) = http::HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(http::header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// Equal bytes, in a time that depends on their lengths only.
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// Whether a request's `Host` is a loopback name (what an open front, or one on a
/// loopback address, answers: a page of another site cannot rebind a name to it).
pub(super) fn names_loopback(headers: &http::HeaderMap) -> bool {
    let Some(host) = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
    else {
        return false;
    };
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abcdefghijklmnop", b"abcdefghijklmnop"));
        assert!(!same(b"abcdefghijklmnop", b"abcdefghijklmnoq"));
        assert!(!same(b"abcdefghijklmnop", b"abcdefghijklmno"));
        assert!(!same(b"abc", b""));
    }
}
