//! The loopback listener a sign-in's redirect comes to (`http://127.0.0.1:PORT/callback`):
//! the one redirect for this sign-in is handed over and the browser told the outcome;
//! anything else gets a page saying what it is, and the wait goes on.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// A redirect to the loopback listener, and where its page goes.
type Arrival = (String, oneshot::Sender<Result<(), String>>);

/// Serves the loopback listener until a redirect for this sign-in (`state`) is
/// `finish`ed: its outcome, shown in the browser too. Other requests get a 404; a
/// redirect for another state is told so and waited past.
pub(super) async fn receive<F, Fut>(
    listener: TcpListener,
    state: &str,
    finish: F,
) -> Result<(), String>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let (arrivals, mut arrived) = mpsc::channel::<Arrival>(4);
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let connections = tokio_util::task::TaskTracker::new();
    let accepting = {
        let connections = connections.clone();
        async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let arrivals = arrivals.clone();
                connections.spawn(async move {
                    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                        let arrivals = arrivals.clone();
                        async move { Ok::<_, Infallible>(page(request, port, &arrivals).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    };
    let waiting = async {
        while let Some((callback, reply)) = arrived.recv().await {
            if query_value(&callback, "state").as_deref() != Some(state) {
                let _ = reply.send(Err(
                    "this page is not for the sign-in planmux is waiting for".into(),
                ));
                continue;
            }
            if let Some(error) = query_value(&callback, "error") {
                let description = query_value(&callback, "error_description").unwrap_or_default();
                let message = format!("the authorization server said {error} {description}");
                let _ = reply.send(Err(message.clone()));
                return Err(message.trim().to_owned());
            }
            let outcome = finish(callback).await;
            let _ = reply.send(outcome.clone());
            return outcome;
        }
        Err("the loopback listener stopped".into())
    };
    let outcome = tokio::select! {
        outcome = waiting => outcome,
        () = accepting => Err("the loopback listener stopped".into()),
    };
    connections.close();
    // Let the browser receive its page.
    let _ = tokio::time::timeout(Duration::from_secs(2), connections.wait()).await;
    outcome
}

/// The answer to one request on the loopback listener.
async fn page(
    request: Request<Incoming>,
    port: u16,
    arrivals: &mpsc::Sender<Arrival>,
) -> Response<Full<Bytes>> {
    if request.uri().path() != "/callback" {
        return html(
            StatusCode::NOT_FOUND,
            "Not found",
            "This is planmux's sign-in listener.",
        );
    }
    let callback = format!("http://127.0.0.1:{port}{}", request.uri());
    let (reply, outcome) = oneshot::channel();
    if arrivals.send((callback, reply)).await.is_err() {
        return html(
            StatusCode::GONE,
            "Sign-in is over",
            "planmux is no longer waiting for this sign-in.",
        );
    }
    match outcome.await {
        Ok(Ok(())) => html(
            StatusCode::OK,
            "Signed in",
            "planmux is signed in. You can close this tab and go back to your terminal.",
        ),
        Ok(Err(e)) => html(StatusCode::BAD_REQUEST, "Sign-in failed", &e),
        Err(_) => html(
            StatusCode::GONE,
            "Sign-in is over",
            "planmux stopped waiting.",
        ),
    }
}

fn html(status: StatusCode, title: &str, text: &str) -> Response<Full<Bytes>> {
    let escape = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>planmux: {0}</title>\
         <body style=\"font-family:sans-serif;margin:3em\"><h1>{0}</h1><p>{1}</p>",
        escape(title),
        escape(text)
    );
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// The value of `key` in `url`'s query, decoded.
pub(super) fn query_value(url: &str, key: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}
