//! `/console` on the front: who may open it, and how a browser signs in.
//!
//! A browser sends no bearer token by itself, so with `[http] tokens` or `[http.auth]` the
//! console asks for one once (a static token or a JWT, checked by the front's [`Gate`])
//! and keeps the caller in an HttpOnly, SameSite=Strict cookie of a random sign-in id,
//! for [`SIGN_IN_TTL`]. A script may send its bearer token instead. On a loopback
//! address with neither set the console is open, like `/mcp`, to requests that name a
//! loopback host (a page of another site cannot rebind a name to it).
//!
//! Only a caller `[[access]]` lets use every tool opens it (it shows every server, tool,
//! run and decision). A form it posts must come from the console's own origin (`Origin`)
//! and carry the sign-in's CSRF token; anything else is refused, saying why.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

use super::gate::{Gate, names_loopback, same};
use super::{Body, plain};
use crate::console::{Asked, Console, Page};
use crate::downstream::Downstreams;
use crate::identity::Identity;

/// How long a browser stays signed in.
pub const SIGN_IN_TTL: Duration = Duration::from_secs(12 * 3600);
/// The cookie that names a sign-in.
const COOKIE: &str = "planmux_console";
/// The largest form the console takes.
const MAX_FORM_BYTES: usize = 64 * 1024;
/// Sign-ins kept at once; the oldest go first.
const MAX_SIGN_INS: usize = 1_000;

/// The console behind its door.
pub(super) struct Door {
    console: Console,
    gate: Arc<Gate>,
    sign_ins: Mutex<HashMap<String, SignedIn>>,
    /// The CSRF token of requests that need no sign-in (an open front, a bearer token).
    csrf: String,
}

/// A browser signed in: who, its CSRF token, and until when.
struct SignedIn {
    who: Identity,
    csrf: String,
    until: Instant,
}

impl Door {
    pub(super) fn new(console: Console, gate: Arc<Gate>) -> Self {
        Self {
            console,
            gate,
            sign_ins: Mutex::default(),
            csrf: random_hex(),
        }
    }

    /// Answers a request under `/console`.
    pub(super) async fn handle(
        &self,
        request: Request<Incoming>,
        downstreams: &Downstreams,
    ) -> Response<Body> {
        if self.gate.is_open() && !names_loopback(request.headers()) {
            return plain(
                StatusCode::FORBIDDEN,
                "the console answers on a loopback name only (localhost, 127.0.0.1, [::1]) while [http] tokens and [http.auth] are unset",
            );
        }
        let post = request.method() == Method::POST;
        if post && let Err(why) = same_origin(&request) {
            return plain(StatusCode::FORBIDDEN, why);
        }
        if request.uri().path() == "/console/sign-in" && post {
            return self.sign_in(request).await;
        }
        let (who, csrf) = match self.who(&request).await {
            Ok(Some(found)) => found,
            Ok(None) => return page(StatusCode::UNAUTHORIZED, self.console.sign_in_page(None)),
            Err(refused) => return refused,
        };
        if !downstreams.grant(Some(&who)).is_all() {
            return plain(
                StatusCode::FORBIDDEN,
                "the console shows every server, tool, run and decision: only a caller whose [[access]] rule allows every tool (tools = [\"*\"]) opens it",
            );
        }
        let path = request.uri().path().to_owned();
        let query = request.uri().query().unwrap_or_default().to_owned();
        let live = request.headers().contains_key("x-planmux-live");
        let form = if post {
            match read_form(request).await {
                Ok(form) => form,
                Err(refused) => return refused,
            }
        } else {
            HashMap::new()
        };
        if post
            && !form
                .get("csrf")
                .is_some_and(|given| same(given.as_bytes(), csrf.as_bytes()))
        {
            return plain(
                StatusCode::FORBIDDEN,
                "the form's CSRF token is missing or stale: reload the page and try again",
            );
        }
        let asked = Asked {
            post,
            path: path.strip_prefix("/console").unwrap_or_default(),
            query: &query,
            form: &form,
            live,
            csrf: &csrf,
            who: &who,
        };
        answer(self.console.answer(asked).await)
    }

    /// Who sends `request`, and its CSRF token: anyone on an open front, the holder of
    /// a bearer token the gate takes (the gate's answer when it refuses it), or a browser
    /// signed in. `None`: none of these.
    async fn who(
        &self,
        request: &Request<Incoming>,
    ) -> Result<Option<(Identity, String)>, Response<Body>> {
        if self.gate.is_open() {
            return Ok(Some((Identity::anyone(), self.csrf.clone())));
        }
        if request.headers().contains_key(header::AUTHORIZATION) {
            let who = self.gate.caller(request).await?;
            return Ok(Some((who, self.csrf.clone())));
        }
        let Some(id) = cookie(request, COOKIE) else {
            return Ok(None);
        };
        let mut sign_ins = self.sign_ins.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        sign_ins.retain(|_, s| s.until > now);
        Ok(sign_ins
            .get(id)
            .map(|found| (found.who.clone(), found.csrf.clone())))
    }

    /// The sign-in form's post: a token the gate takes signs the browser in.
    async fn sign_in(&self, request: Request<Incoming>) -> Response<Body> {
        let form = match read_form(request).await {
            Ok(form) => form,
            Err(refused) => return refused,
        };
        let token = form.get("token").map_or("", |t| t.trim());
        if self.gate.is_open() {
            return see_other("/console", None);
        }
        if token.is_empty() {
            let why = "paste a token: one of [http] tokens, or a JWT of the [http.auth] issuer";
            return page(
                StatusCode::UNAUTHORIZED,
                self.console.sign_in_page(Some(why)),
            );
        }
        let who = match self.gate.identify(token).await {
            Ok(who) => who,
            Err(_) => {
                let why = "that token was refused";
                return page(
                    StatusCode::UNAUTHORIZED,
                    self.console.sign_in_page(Some(why)),
                );
            }
        };
        let id = random_hex();
        {
            let mut sign_ins = self.sign_ins.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            sign_ins.retain(|_, s| s.until > now);
            if sign_ins.len() >= MAX_SIGN_INS
                && let Some(oldest) = (sign_ins.iter())
                    .min_by_key(|(_, s)| s.until)
                    .map(|(id, _)| id.clone())
            {
                sign_ins.remove(&oldest);
            }
            let signed_in = SignedIn {
                who,
                csrf: random_hex(),
                until: now + SIGN_IN_TTL,
            };
            sign_ins.insert(id.clone(), signed_in);
        }
        let cookie = format!(
            "{COOKIE}={id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}",
            SIGN_IN_TTL.as_secs()
        );
        see_other("/console", Some(cookie))
    }
}

/// The response for a console page.
fn answer(page_: Page) -> Response<Body> {
    match page_ {
        Page::Html(html) => page(StatusCode::OK, html),
        Page::Script(script) => {
            let mut response =
                Response::new(Full::new(Bytes::from_static(script.as_bytes())).boxed());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/javascript; charset=utf-8"),
            );
            response
        }
        Page::SeeOther(to) => see_other(&to, None),
        Page::NotFound(why) => plain(StatusCode::NOT_FOUND, why),
        Page::Refused(why) => plain(StatusCode::CONFLICT, why),
    }
}

fn page(status: StatusCode, html: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(html)).boxed());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // Its own script and styles only; no frame may hold it.
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
        ),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

fn see_other(to: &str, cookie: Option<String>) -> Response<Body> {
    let mut response = plain(StatusCode::SEE_OTHER, "");
    if let Ok(to) = header::HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, to);
    }
    if let Some(value) = cookie.and_then(|c| header::HeaderValue::from_str(&c).ok()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// A form body (`application/x-www-form-urlencoded`), within [`MAX_FORM_BYTES`].
async fn read_form(request: Request<Incoming>) -> Result<HashMap<String, String>, Response<Body>> {
    let body = http_body_util::Limited::new(request.into_body(), MAX_FORM_BYTES);
    let Ok(body) = body.collect().await else {
        return Err(plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the form is larger than 64 KiB, or was cut off",
        ));
    };
    let bytes = body.to_bytes();
    Ok(url::form_urlencoded::parse(&bytes).into_owned().collect())
}

/// A post from another origin is refused: its `Origin` must be this host's.
fn same_origin<B>(request: &Request<B>) -> Result<(), &'static str> {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok());
    match (host, origin) {
        (Some(host), Some(origin))
            if origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                == Some(host) =>
        {
            Ok(())
        }
        (_, None) => Err("a console form must be posted by the console's page (no Origin header)"),
        _ => Err("refused: the form was posted from another origin than the console's"),
    }
}

/// The value of the cookie `name`.
fn cookie<'a, B>(request: &'a Request<B>, name: &str) -> Option<&'a str> {
    request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// 32 random hex digits (a sign-in id, a CSRF token), as run ids are made.
fn random_hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> Request<()> {
        let mut builder = Request::builder().method(Method::POST).uri("/console");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).expect("a request")
    }

    #[test]
    fn a_form_from_another_origin_is_refused() {
        let ours = request(&[
            ("host", "127.0.0.1:8787"),
            ("origin", "http://127.0.0.1:8787"),
        ]);
        assert!(same_origin(&ours).is_ok());
        let theirs = request(&[
            ("host", "127.0.0.1:8787"),
            ("origin", "http://evil.example"),
        ]);
        assert!(same_origin(&theirs).is_err());
        let none = request(&[("host", "127.0.0.1:8787")]);
        assert!(same_origin(&none).is_err());
    }

    #[test]
    fn only_loopback_names_reach_an_open_console() {
        for host in [
            "localhost:8787",
            "127.0.0.1:8787",
            "[::1]:8787",
            "localhost",
        ] {
            assert!(
                names_loopback(request(&[("host", host)]).headers()),
                "{host}"
            );
        }
        for host in ["evil.example:8787", "10.0.0.1", ""] {
            assert!(
                !names_loopback(request(&[("host", host)]).headers()),
                "{host}"
            );
        }
    }

    #[test]
    fn the_sign_in_cookie_is_found_among_others() {
        let r = request(&[("cookie", "a=1; planmux_console=abc; b=2")]);
        assert_eq!(cookie(&r, COOKIE), Some("abc"));
        assert_eq!(cookie(&request(&[]), COOKIE), None);
    }
}
