//! The HTTP front over real HTTP on 127.0.0.1, driven by rmcp's streamable-HTTP client:
//! sessions that do not cross, tokens, origins, health, and shutdown with a call in
//! flight.

use std::net::SocketAddr;
use std::time::Duration;

use planmux::config::Config;
use planmux::http::{HttpError, HttpOptions, serve_http};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{Elicit, Recorder, call, eventually, text};

type R = anyhow::Result<()>;

const TOKEN: &str = "0123456789abcdef0123";

/// A running front: its address, and the switch that shuts it down.
struct Front {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), HttpError>>,
    _dir: tempfile::TempDir,
}

impl Front {
    async fn start(extra: &str) -> anyhow::Result<Front> {
        Self::start_with(extra, false).await
    }

    /// The front over exactly the servers `text` configures.
    async fn only(text: &str) -> anyhow::Result<Front> {
        let dir = tempfile::tempdir()?;
        let config = Config::parse(text, "test", dir.path(), &|_| None)?;
        Self::serve(config, false, dir).await
    }

    async fn start_with(extra: &str, stateless: bool) -> anyhow::Result<Front> {
        let dir = tempfile::tempdir()?;
        let text = format!(
            "[servers.files]\nbuiltin = \"files\"\ncwd = \"sandbox\"\n[servers.chaos]\nbuiltin = \"chaos\"\n{extra}"
        );
        let config = Config::parse(&text, "test", dir.path(), &|_| None)?;
        Self::serve(config, stateless, dir).await
    }

    /// Serves `config` (whose files are in `dir`, kept as long as the front runs).
    async fn serve(
        config: Config,
        stateless: bool,
        dir: tempfile::TempDir,
    ) -> anyhow::Result<Front> {
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let options = HttpOptions {
            addr: "127.0.0.1:0".parse()?,
            stateless,
        };
        let task = tokio::spawn(async move {
            let ready = move |addr| {
                let _ = ready_tx.send(addr);
            };
            serve_http(&config, options, ready, async {
                let _ = stop_rx.await;
            })
            .await
        });
        let addr = ready_rx.await?;
        Ok(Front {
            addr,
            stop: Some(stop_tx),
            task,
            _dir: dir,
        })
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    async fn client(
        &self,
        handler: Recorder,
        token: Option<&str>,
    ) -> anyhow::Result<rmcp::service::RunningService<rmcp::RoleClient, Recorder>> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url());
        if let Some(token) = token {
            config = config.auth_header(token);
        }
        // rmcp's reqwest client needs a TLS provider even for http:// (src/main.rs installs
        // the same one in the binary).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let transport = StreamableHttpClientTransport::from_config(config);
        Ok(handler.serve(transport).await?)
    }

    /// A raw HTTP/1.1 request; the status line and body of the answer.
    async fn raw(&self, request: &str) -> anyhow::Result<String> {
        let mut stream = tokio::net::TcpStream::connect(self.addr).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut answer = String::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut answer)).await;
        Ok(answer)
    }
}

fn write_plan(path: &str) -> serde_json::Value {
    json!({"steps": [{"id": "save", "tool": "files__write_file",
                      "args": {"path": path, "content": "hi"}}]})
}

/// Two sessions at once: each sees its own tools and results, and the approval one
/// session's plan needs is asked of that session only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_do_not_cross() -> R {
    let front = Front::start("").await?;
    let asker = Recorder {
        capable: true,
        elicit: Elicit::Accept,
        ..Default::default()
    };
    let a = front.client(asker.clone(), None).await?;
    let quiet = Recorder::default();
    let b = front.client(quiet.clone(), None).await?;
    let names: Vec<String> = a
        .list_all_tools()
        .await?
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(names.contains(&"execute_plan".to_owned()), "{names:?}");
    let (ra, rb) = tokio::join!(
        a.call_tool(call("execute_plan", write_plan("a.txt"))),
        b.call_tool(call("execute_plan", write_plan("b.txt")))
    );
    let (ra, rb) = (ra?, rb?);
    let sa = ra.structured_content.clone().unwrap_or_default();
    let sb = rb.structured_content.clone().unwrap_or_default();
    assert_eq!(sa["status"], "succeeded", "{}", text(&ra));
    assert_eq!(sb["status"], "needs_approval", "{}", text(&rb));
    let asked = asker.seen.lock().map(|s| s.elicitations.len()).unwrap_or(0);
    let asked_b = quiet.seen.lock().map(|s| s.elicitations.len()).unwrap_or(0);
    assert_eq!(
        (asked, asked_b),
        (1, 0),
        "the approval went to the session that asked"
    );
    // A plain call on each session, at once.
    let (ea, eb) = tokio::join!(
        a.call_tool(call("chaos__echo", json!({"who": "a"}))),
        b.call_tool(call("chaos__echo", json!({"who": "b"})))
    );
    assert!(text(&ea?).contains("\"a\""));
    assert!(text(&eb?).contains("\"b\""));
    a.cancel().await?;
    b.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn tokens_origins_and_health_guard_the_front() -> R {
    let front = Front::start(&format!("[http]\ntokens = [\"{TOKEN}\"]\n")).await?;
    assert!(
        front.client(Recorder::default(), None).await.is_err(),
        "no token"
    );
    assert!(
        front
            .client(Recorder::default(), Some("0123456789abcdef0124"))
            .await
            .is_err(),
        "a wrong token"
    );
    let client = front.client(Recorder::default(), Some(TOKEN)).await?;
    assert!(!client.list_all_tools().await?.is_empty());
    client.cancel().await?;

    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let post = |headers: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let unauthorized = front.raw(&post("")).await?;
    assert!(unauthorized.starts_with("HTTP/1.1 401"), "{unauthorized}");
    assert!(
        unauthorized
            .to_lowercase()
            .contains("www-authenticate: bearer")
    );
    let evil = front
        .raw(&post(&format!(
            "Authorization: Bearer {TOKEN}\r\nOrigin: https://evil.example\r\n"
        )))
        .await?;
    assert!(evil.starts_with("HTTP/1.1 403"), "{evil}");
    let health = front
        .raw("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await?;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.contains("\"status\":\"ok\""), "{health}");
    Ok(())
}

#[tokio::test]
async fn a_public_address_without_tokens_does_not_start() -> R {
    let dir = tempfile::tempdir()?;
    let config = Config::parse(
        "[servers.c]\nbuiltin = \"chaos\"\n",
        "t",
        dir.path(),
        &|_| None,
    )?;
    let options = HttpOptions {
        addr: "0.0.0.0:0".parse()?,
        stateless: false,
    };
    let refused = serve_http(&config, options, |_| {}, async {}).await;
    assert!(
        matches!(&refused, Err(HttpError::Unprotected { .. })),
        "{refused:?}"
    );
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("[http] tokens"), "{message}");
    Ok(())
}

/// Shutdown with a call in flight: the call ends (cancelled) and the front returns,
/// within its drain time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_calls_in_flight_and_returns() -> R {
    let mut front = Front::start("").await?;
    let client = front.client(Recorder::default(), None).await?;
    let call = tokio::spawn(async move {
        client
            .call_tool(call("chaos__sleep", json!({"ms": 60_000})))
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    if let Some(stop) = front.stop.take() {
        let _ = stop.send(());
    }
    let ended = tokio::time::timeout(Duration::from_secs(10), &mut front.task).await;
    assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
    assert!(started.elapsed() < Duration::from_secs(8));
    let answered = tokio::time::timeout(Duration::from_secs(10), call).await;
    assert!(answered.is_ok(), "the call in flight ended");
    Ok(())
}

/// A server's changed tool list reaches every HTTP session as list_changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changes_reach_every_session() -> R {
    let front = Front::start("").await?;
    let (first, second) = (Recorder::default(), Recorder::default());
    let a = front.client(first.clone(), None).await?;
    let b = front.client(second.clone(), None).await?;
    a.call_tool(call("chaos__toggle_extra", json!({}))).await?;
    let heard = |r: &Recorder| r.seen.lock().map(|s| s.list_changed).unwrap_or(0);
    let mut both = false;
    for _ in 0..50 {
        if heard(&first) > 0 && heard(&second) > 0 {
            both = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        both,
        "list_changed: {} and {}",
        heard(&first),
        heard(&second)
    );
    a.cancel().await?;
    b.cancel().await?;
    Ok(())
}

/// The session's own roots, elicitation and log messages: what a server asks or says
/// during a session's call reaches that session and no other, whether the call is direct
/// or a plan's step; while calls of two sessions are in flight on it, a 2026-07-28
/// server's question (MRTR) still reaches the session of the call it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_ask_and_tell_only_the_calling_session() -> R {
    let front = Front::start("").await?;
    let recorder = |root: &str| Recorder {
        capable: true,
        elicit: Elicit::Accept,
        roots: std::sync::Arc::new(std::sync::Mutex::new(vec![root.to_owned()])),
        ..Default::default()
    };
    let (first, second) = (recorder("file:///a"), recorder("file:///b"));
    let a = front.client(first.clone(), None).await?;
    let b = front.client(second.clone(), None).await?;
    let ask = |kind: &str| call("chaos__ask_host", json!({ "kind": kind }));
    let (ra, rb) = (
        a.call_tool(ask("roots")).await?,
        b.call_tool(ask("roots")).await?,
    );
    assert!(
        text(&ra).contains("file:///a") && !text(&ra).contains("file:///b"),
        "{}",
        text(&ra)
    );
    assert!(text(&rb).contains("file:///b"), "{}", text(&rb));
    // In a plan, the step's server asks the session that sent the plan.
    let plan = json!({"steps": [{"id": "ask", "tool": "chaos__ask_host", "args": {"kind": "elicitation"}}]});
    let planned = b.call_tool(call("execute_plan", plan)).await?;
    assert!(text(&planned).contains("Ada"), "{}", text(&planned));
    let asked = |r: &Recorder| r.seen.lock().map(|s| s.elicitations.len()).unwrap_or(0);
    assert_eq!((asked(&first), asked(&second)), (0, 1));
    // Log messages ride the session's standalone stream (as from the server directly),
    // which the client opens after its handshake: one sent before it is open is lost, so
    // the call is made until one arrives.
    let logs = |r: &Recorder| r.seen.lock().map(|s| s.logs.len()).unwrap_or(0);
    for _ in 0..10 {
        let logged = a
            .call_tool(call("chaos__log", json!({"message": "for a only"})))
            .await?;
        assert!(logged.is_error != Some(true), "{}", text(&logged));
        for _ in 0..25 {
            if logs(&first) > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if logs(&first) > 0 {
            break;
        }
    }
    assert!(logs(&first) > 0, "the calling session got no log message");
    assert_eq!(logs(&second), 0, "the other session got a log message");
    // Calls of both sessions in flight on chaos: a 2026-07-28 server's question is an
    // answer to the call that caused it (MRTR), so it reaches that call's session.
    let (slow, answered) = tokio::join!(
        a.call_tool(call("chaos__sleep", json!({"ms": 1500}))),
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            b.call_tool(ask("elicitation")).await
        }
    );
    slow?;
    let answered = answered?;
    assert!(text(&answered).contains("Ada"), "{}", text(&answered));
    assert_eq!((asked(&first), asked(&second)), (0, 2), "only b was asked");
    a.cancel().await?;
    b.cancel().await?;
    Ok(())
}

/// A server of the earlier era (`planmux demo chaos --legacy`: requests during a call, no
/// `server/discover`) asks its question with a request, which names no call: it reaches
/// the one session whose call is in flight on that server; while calls of two sessions
/// are in flight there, it cannot be placed and neither is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_servers_request_reaches_the_one_session_whose_call_is_in_flight() -> R {
    let config = format!(
        "[servers.old]\ncommand = \"{}\"\nargs = [\"demo\", \"chaos\", \"--legacy\"]\n",
        crate::common::bin()
    );
    let front = Front::only(&config).await?;
    let recorder = || Recorder {
        capable: true,
        elicit: Elicit::Accept,
        ..Default::default()
    };
    let (first, second) = (recorder(), recorder());
    let a = front.client(first.clone(), None).await?;
    let b = front.client(second.clone(), None).await?;
    let ask = || call("old__ask_host", json!({"kind": "elicitation"}));
    let answered = b.call_tool(ask()).await?;
    assert!(text(&answered).contains("Ada"), "{}", text(&answered));
    let asked = |r: &Recorder| r.seen.lock().map(|s| s.elicitations.len()).unwrap_or(0);
    assert_eq!((asked(&first), asked(&second)), (0, 1));
    let (slow, refused) = tokio::join!(
        a.call_tool(call("old__sleep", json!({"ms": 1500}))),
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            b.call_tool(ask()).await
        }
    );
    slow?;
    let refused = refused?;
    assert!(
        text(&refused).contains("several HTTP sessions"),
        "{}",
        text(&refused)
    );
    assert_eq!(
        (asked(&first), asked(&second)),
        (0, 1),
        "nobody more was asked"
    );
    a.cancel().await?;
    b.cancel().await?;
    Ok(())
}

/// Two sessions' calls at once, each with its progress token: each session hears its own
/// call's progress only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_only_the_session_that_asked() -> R {
    use rmcp::model::{
        CallToolRequest, ClientRequest, NumberOrString, ProgressToken, RequestMetaObject,
    };
    let front = Front::start("").await?;
    let (first, second) = (Recorder::default(), Recorder::default());
    let a = front.client(first.clone(), None).await?;
    let b = front.client(second.clone(), None).await?;
    let sleep = |token: &str| {
        let token = ProgressToken(NumberOrString::String(token.into()));
        let mut params = call("chaos__sleep", json!({"ms": 300, "steps": 3}));
        params.meta = Some(RequestMetaObject::with_progress_token(token.clone()));
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let options = rmcp::service::PeerRequestOptions::with_timeout(Duration::from_secs(10))
            .with_meta(RequestMetaObject::with_progress_token(token));
        (request, options)
    };
    let ((ra, oa), (rb, ob)) = (sleep("a"), sleep("b"));
    let (ha, hb) = tokio::join!(
        a.send_cancellable_request(ra, oa),
        b.send_cancellable_request(rb, ob)
    );
    let (ha, hb) = (ha?, hb?);
    let (ta, tb) = (ha.progress_token.clone(), hb.progress_token.clone());
    let (done_a, done_b) = tokio::join!(ha.await_response(), hb.await_response());
    done_a?;
    done_b?;
    let tokens = |r: &Recorder| -> Vec<ProgressToken> {
        r.seen
            .lock()
            .map(|s| {
                s.progress
                    .iter()
                    .map(|p| p.progress_token.clone())
                    .collect()
            })
            .unwrap_or_default()
    };
    // All six notifications (three a call) arrived, wherever they went.
    let arrived = || tokens(&first).len() + tokens(&second).len() >= 6;
    eventually(Duration::from_secs(5), arrived).await;
    let (pa, pb) = (tokens(&first), tokens(&second));
    assert!(pa.len() >= 3 && pa.iter().all(|t| *t == ta), "a: {pa:?}");
    assert!(pb.len() >= 3 && pb.iter().all(|t| *t == tb), "b: {pb:?}");
    a.cancel().await?;
    b.cancel().await?;
    Ok(())
}

/// `[http] rate_limit` counts each caller (each bearer token) apart: past its rate a
/// request is answered 429 with `Retry-After`, and the other caller goes on; a request
/// without a token is still 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_past_its_rate_is_told_when_to_retry() -> R {
    const OTHER: &str = "fedcba9876543210fedc";
    let front = Front::start(&format!(
        "[http]\ntokens = [\"{TOKEN}\", \"{OTHER}\"]\nrate_limit = \"3/min\"\n"
    ))
    .await?;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let post = |token: &str| {
        let auth = if token.is_empty() {
            String::new()
        } else {
            format!("Authorization: Bearer {token}\r\n")
        };
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\n{auth}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    for n in 0..3 {
        let answer = front.raw(&post(TOKEN)).await?;
        assert!(answer.starts_with("HTTP/1.1 200"), "{n}: {answer}");
    }
    let refused = front.raw(&post(TOKEN)).await?;
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    assert!(
        refused.to_lowercase().contains("retry-after: 20"),
        "a request's share of the minute: {refused}"
    );
    assert!(refused.contains("rate_limit"), "{refused}");
    let other = front.raw(&post(OTHER)).await?;
    assert!(other.starts_with("HTTP/1.1 200"), "{other}");
    let anonymous = front.raw(&post("")).await?;
    assert!(anonymous.starts_with("HTTP/1.1 401"), "{anonymous}");
    Ok(())
}

/// A resource update reaches the session that subscribed, not the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // resources/subscribe is what 2025-11-25 sessions use
async fn resource_updates_reach_the_subscribed_session_only() -> R {
    let front = Front::start("[servers.conformance]\nbuiltin = \"conformance\"\n").await?;
    let (first, second) = (Recorder::default(), Recorder::default());
    let a = front.client(first.clone(), None).await?;
    let b = front.client(second.clone(), None).await?;
    // The fixture reports the resource updated as soon as it is subscribed to.
    let uri = "test://watched-resource";
    a.subscribe(rmcp::model::SubscribeRequestParams::new(uri))
        .await?;
    let updated = |r: &Recorder| r.seen.lock().map(|s| s.updated.clone()).unwrap_or_default();
    for _ in 0..50 {
        if !updated(&first).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(updated(&first), vec![uri.to_owned()]);
    assert!(updated(&second).is_empty(), "{:?}", updated(&second));
    a.cancel().await?;
    b.cancel().await?;
    Ok(())
}

/// A session that closes gives its subscriptions back: the server hears of the next
/// session's subscription (a count left at one would never ask it again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // resources/subscribe is what 2025-11-25 sessions use
async fn a_closed_sessions_subscriptions_are_given_back() -> R {
    let front = Front::start("[servers.conformance]\nbuiltin = \"conformance\"\n").await?;
    // The fixture reports the resource updated each time it is subscribed to.
    let uri = "test://watched-resource";
    let subscribe = || rmcp::model::SubscribeRequestParams::new(uri);
    let updated = |r: &Recorder| r.seen.lock().map(|s| s.updated.clone()).unwrap_or_default();
    let first = Recorder::default();
    let a = front.client(first.clone(), None).await?;
    a.subscribe(subscribe()).await?;
    for _ in 0..50 {
        if !updated(&first).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(updated(&first), vec![uri.to_owned()]);
    a.cancel().await?;
    // The closed session's subscription is given back once its handler is gone: until
    // then a new one only joins it, so subscribe again now and then.
    let second = Recorder::default();
    let b = front.client(second.clone(), None).await?;
    for _ in 0..50 {
        b.subscribe(subscribe()).await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
        if !updated(&second).is_empty() {
            break;
        }
        b.unsubscribe(rmcp::model::UnsubscribeRequestParams::new(uri))
            .await?;
    }
    assert_eq!(updated(&second), vec![uri.to_owned()]);
    b.cancel().await?;
    Ok(())
}

/// `--stateless`: every request stands alone, and calls and plans still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // resources/subscribe is what 2025-11-25 sessions use
async fn a_stateless_front_answers_calls_and_plans() -> R {
    let front = Front::start_with("", true).await?;
    let client = front.client(Recorder::default(), None).await?;
    let names: Vec<String> = client
        .list_all_tools()
        .await?
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(names.contains(&"chaos__echo".to_owned()), "{names:?}");
    let echoed = client
        .call_tool(call("chaos__echo", json!({"said": "alone"})))
        .await?;
    assert!(text(&echoed).contains("alone"), "{}", text(&echoed));
    let plan = json!({"steps": [{"id": "e", "tool": "chaos__echo", "args": {"n": 1}}]});
    let ran = client.call_tool(call("execute_plan", plan)).await?;
    let result = ran.structured_content.clone().unwrap_or_default();
    assert_eq!(result["status"], "succeeded", "{}", text(&ran));
    // A stateless run belongs to no session: it is listed to no one, and a later request
    // reads its record by its id, which cannot be guessed.
    let run_id = result["run_id"].as_str().unwrap_or_default();
    assert!(
        run_id.len() >= 32 && run_id.chars().all(|c| c.is_ascii_hexdigit()),
        "a guessable run id: {run_id}"
    );
    let uri = format!("planmux://runs/{run_id}");
    let resources = client.list_all_resources().await?;
    assert!(
        !resources
            .iter()
            .any(|r| r.uri.starts_with("planmux://runs/")),
        "a sessionless run is listed: {resources:?}"
    );
    let record = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
        .await?;
    assert!(format!("{record:?}").contains("chaos__echo"), "{record:?}");
    // No update could reach a request that has no session: a subscription is refused.
    let refused = client
        .subscribe(rmcp::model::SubscribeRequestParams::new("file:///a.txt"))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(refused.contains("need a session"), "{refused}");
    client.cancel().await?;
    Ok(())
}

/// servers.toml changed while sessions are open: the added server's tools arrive, the
/// removed server's leave, and every session is told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_adds_and_removes_servers_while_sessions_are_open() -> R {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("servers.toml");
    std::fs::write(&path, "[servers.chaos]\nbuiltin = \"chaos\"\n")?;
    let front = Front::serve(Config::load(&path)?, false, dir).await?;
    let recorder = Recorder::default();
    let client = front.client(recorder.clone(), None).await?;
    let names = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools.into_iter().map(|t| t.name.to_string()).collect()
    };
    assert!(names(client.list_all_tools().await?).contains(&"chaos__echo".to_owned()));
    std::fs::write(&path, "[servers.weather]\nbuiltin = \"weather\"\n")?;
    let mut listed = Vec::new();
    for _ in 0..100 {
        listed = names(client.list_all_tools().await?);
        if listed.contains(&"weather__get_weather".to_owned()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        listed.contains(&"weather__get_weather".to_owned()),
        "{listed:?}"
    );
    assert!(
        !listed.iter().any(|n| n.starts_with("chaos__")),
        "{listed:?}"
    );
    let told = recorder.seen.lock().map(|s| s.list_changed).unwrap_or(0);
    assert!(told > 0, "the session was not told the list changed");
    let weather = client
        .call_tool(call("weather__get_weather", json!({"location": "Oslo"})))
        .await?;
    assert!(text(&weather).contains("Oslo"), "{}", text(&weather));
    client.cancel().await?;
    Ok(())
}

/// `[[access]]` is read again on reload: what a caller lists and may call follows the new
/// rules at once, and its session is told its lists changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_rules_are_read_again_on_reload() -> R {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("servers.toml");
    let config = |tools: &str| {
        format!(
            "[[access]]\nwho = [\"*\"]\ntools = [\"{tools}\"]\n\n\
             [servers.chaos]\nbuiltin = \"chaos\"\n\n[servers.weather]\nbuiltin = \"weather\"\n"
        )
    };
    std::fs::write(&path, config("chaos__*"))?;
    let front = Front::serve(Config::load(&path)?, false, dir).await?;
    let recorder = Recorder::default();
    let client = front.client(recorder.clone(), None).await?;
    let names = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools.into_iter().map(|t| t.name.to_string()).collect()
    };
    let listed = names(client.list_all_tools().await?);
    assert!(
        listed.iter().all(|n| n.starts_with("chaos__")) && !listed.is_empty(),
        "{listed:?}"
    );
    let weather = call("weather__get_weather", json!({"location": "Oslo"}));
    let refused = client
        .call_tool(weather.clone())
        .await
        .err()
        .map(|e| e.to_string());
    assert!(refused.is_some_and(|e| e.contains("unknown tool")));
    std::fs::write(&path, config("weather__*"))?;
    let mut listed = Vec::new();
    for _ in 0..100 {
        listed = names(client.list_all_tools().await?);
        if listed.iter().any(|n| n.starts_with("weather__")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !listed.is_empty() && listed.iter().all(|n| n.starts_with("weather__")),
        "{listed:?}"
    );
    assert!(text(&client.call_tool(weather).await?).contains("Oslo"));
    let echo = client.call_tool(call("chaos__echo", json!({"a": 1}))).await;
    assert!(
        echo.err()
            .is_some_and(|e| e.to_string().contains("unknown tool"))
    );
    let told = recorder.seen.lock().map(|s| s.list_changed).unwrap_or(0);
    assert!(told > 0, "the session was not told its list changed");
    client.cancel().await?;
    Ok(())
}

/// A run's record is its session's: another session neither lists nor reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_cannot_read_each_others_run_records() -> R {
    let front = Front::start("").await?;
    let a = front.client(Recorder::default(), None).await?;
    let b = front.client(Recorder::default(), None).await?;
    let plan = json!({"steps": [{"id": "e", "tool": "chaos__echo", "args": {"secret": "a's"}}]});
    let ran = a.call_tool(call("execute_plan", plan)).await?;
    let run_id = ran.structured_content.clone().unwrap_or_default()["run_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!run_id.is_empty(), "{}", text(&ran));
    let uri = format!("planmux://runs/{run_id}");
    let listed =
        |resources: Vec<rmcp::model::Resource>| -> bool { resources.iter().any(|r| r.uri == uri) };
    assert!(
        listed(a.list_all_resources().await?),
        "its own session lists it"
    );
    assert!(
        !listed(b.list_all_resources().await?),
        "another session lists it"
    );
    let own = a
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri.clone()))
        .await?;
    assert!(format!("{own:?}").contains("a's"));
    let other = b
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri.clone()))
        .await;
    assert!(other.is_err(), "another session read it: {other:?}");
    a.cancel().await?;
    b.cancel().await?;
    Ok(())
}

/// A call given up without an answer (here: timed out) leaves its session out of what
/// the server asks next: another session's call there is asked its own question, and the
/// session that gave up is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_still_working_for_a_session_that_gave_up_asks_no_other() -> R {
    let front =
        Front::start("[servers.slow]\nbuiltin = \"chaos\"\ncall_timeout_ms = 200\n").await?;
    let asker = Recorder {
        capable: true,
        elicit: Elicit::Accept,
        ..Default::default()
    };
    let a = front.client(asker.clone(), None).await?;
    let b = front.client(Recorder::default(), None).await?;
    let gave_up = b
        .call_tool(call("slow__sleep", json!({"ms": 1500})))
        .await?;
    assert!(
        text(&gave_up).contains("did not answer"),
        "{}",
        text(&gave_up)
    );
    // The server's question is an answer to a's call (MRTR): a is asked, b is not.
    let answered = a
        .call_tool(call("slow__ask_host", json!({"kind": "elicitation"})))
        .await?;
    assert!(text(&answered).contains("Ada"), "{}", text(&answered));
    let asked = asker.seen.lock().map(|s| s.elicitations.len()).unwrap_or(0);
    assert_eq!(asked, 1, "the calling session was not asked once");
    a.cancel().await?;
    b.cancel().await?;
    Ok(())
}

/// A POST of `body` to the front, as a client without the standalone GET stream would
/// send it; the connection, to read the answer's stream from.
async fn post_raw(
    front: &Front,
    session: Option<&str>,
    body: &str,
) -> anyhow::Result<tokio::net::TcpStream> {
    let session = session.map_or_else(String::new, |s| format!("Mcp-Session-Id: {s}\r\n"));
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\n{session}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(front.addr).await?;
    stream.write_all(request.as_bytes()).await?;
    Ok(stream)
}

/// The answer to a 2026-07-28 request (`method`, no session) to the front, its body.
async fn ask_2026(front: &Front, method: &str) -> anyhow::Result<String> {
    post_2026(front, 7, method, json!({})).await
}

/// A 2026-07-28 request (`method` with `params`, its `_meta` added; no session) to the
/// front: what it answered, headers and all.
async fn post_2026(
    front: &Front,
    id: u32,
    method: &str,
    mut params: serde_json::Value,
) -> anyhow::Result<String> {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}
    });
    let name = params["name"]
        .as_str()
        .map_or_else(String::new, |name| format!("Mcp-Name: {name}\r\n"));
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let body = body.to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n{name}Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(front.addr).await?;
    stream.write_all(request.as_bytes()).await?;
    let mut seen = String::new();
    read_until(&mut stream, &mut seen, &format!("\"id\":{id}")).await;
    Ok(seen)
}

/// A 2026-07-28 host may keep the merged lists as long as the shortest time a server gave
/// (its `ttlMs`), never over planmux's 60 s, privately; an older host gets no hints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_lists_carry_the_shortest_cache_time() -> R {
    let ttl = |answer: &str| {
        let at = answer.find("\"ttlMs\":")? + "\"ttlMs\":".len();
        let digits: String = answer[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse::<u64>().ok()
    };
    let both =
        "[servers.metrics]\nbuiltin = \"metrics\"\n[servers.weather]\nbuiltin = \"weather\"\n";
    let front = Front::only(both).await?;
    let answer = ask_2026(&front, "tools/list").await?;
    assert_eq!(
        ttl(&answer),
        Some(30_000),
        "the shorter of 30 s and 5 min: {answer}"
    );
    assert!(answer.contains(r#""cacheScope":"private""#), "{answer}");
    let client = front.client(Recorder::default(), None).await?;
    let listed = client.list_tools(None).await?;
    assert_eq!(listed.ttl_ms, None, "a 2025-11-25 host gets no ttlMs");
    client.cancel().await?;
    let weather = Front::only("[servers.weather]\nbuiltin = \"weather\"\n").await?;
    let answer = ask_2026(&weather, "tools/list").await?;
    assert_eq!(
        ttl(&answer),
        Some(60_000),
        "never over planmux's own: {answer}"
    );
    let chaos = Front::only("[servers.chaos]\nbuiltin = \"chaos\"\n").await?;
    let answer = ask_2026(&chaos, "tools/list").await?;
    assert_eq!(
        ttl(&answer),
        Some(0),
        "a server that says nothing is taken as 0: {answer}"
    );
    Ok(())
}

/// What `stream` says until `needle` appears in it (within 10 s), or all it said by then.
async fn read_until(stream: &mut tokio::net::TcpStream, seen: &mut String, needle: &str) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut buffer = [0u8; 4096];
    while !seen.contains(needle) {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Ok(Ok(n)) if n > 0 => seen.push_str(&String::from_utf8_lossy(&buffer[..n])),
            _ => return false,
        }
    }
    true
}

/// A server's request during a session's call rides that call's own stream, as from the
/// server directly: a client that never opens the standalone GET stream still gets it
/// (it was sent on the GET stream, and the call waited out its time limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_request_rides_the_stream_of_the_call_that_caused_it() -> R {
    let front = Front::start("").await?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"roots": {}},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let mut stream = post_raw(&front, None, &init.to_string()).await?;
    let mut seen = String::new();
    assert!(
        read_until(&mut stream, &mut seen, "serverInfo").await,
        "{seen}"
    );
    let session = seen
        .lines()
        .find_map(|l| {
            l.to_lowercase()
                .strip_prefix("mcp-session-id:")
                .map(|_| l[15..].trim().to_owned())
        })
        .ok_or_else(|| anyhow::anyhow!("no session id: {seen}"))?;
    // Each POST's answer is read before its connection closes (closing at once may
    // drop the request).
    let accepted = |mut stream: tokio::net::TcpStream| async move {
        let mut status = String::new();
        read_until(&mut stream, &mut status, "\r\n").await;
        status
    };
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let status = accepted(post_raw(&front, Some(&session), &initialized.to_string()).await?).await;
    assert!(status.starts_with("HTTP/1.1 202"), "{status}");
    let ask = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "chaos__ask_host", "arguments": {"kind": "roots"}}});
    let mut call = post_raw(&front, Some(&session), &ask.to_string()).await?;
    let mut said = String::new();
    assert!(
        read_until(&mut call, &mut said, "roots/list").await,
        "the server's request did not come on the call's stream: {said}"
    );
    let request: serde_json::Value = said
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|m: &serde_json::Value| m["method"] == "roots/list")
        .ok_or_else(|| anyhow::anyhow!("no roots/list message: {said}"))?;
    let roots = json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"roots": [{"uri": "file:///raw-client"}]}});
    let status = accepted(post_raw(&front, Some(&session), &roots.to_string()).await?).await;
    assert!(status.starts_with("HTTP/1.1 202"), "{status}");
    assert!(
        read_until(&mut call, &mut said, "file:///raw-client").await,
        "the call did not end with the host's roots: {said}"
    );
    Ok(())
}

/// A 2025-11-25 session is offered tasks, which planmux holds for it
/// (`upstream::legacy_tasks`, tested with the TypeScript SDK in interop); a stateless
/// front, which keeps nothing between requests, offers none. The names the front gives
/// task messages for rmcp are no way in: a host that sends one itself is answered that
/// there is no such method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_session_is_offered_tasks_and_a_stateless_front_none() -> R {
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    for (stateless, offered) in [(false, true), (true, false)] {
        let front = Front::start_with("", stateless).await?;
        let mut stream = post_raw(&front, None, init).await?;
        let mut seen = String::new();
        read_until(&mut stream, &mut seen, "serverInfo").await;
        let tasks = r#""tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}"#;
        assert_eq!(
            seen.contains(tasks),
            offered,
            "stateless: {stateless}: {seen}"
        );
        if stateless {
            continue;
        }
        let session = seen
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id: "))
            .map(str::trim)
            .unwrap_or_default()
            .to_owned();
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        drop(post_raw(&front, Some(&session), initialized).await?);
        let spoof =
            r#"{"jsonrpc":"2.0","id":2,"method":"planmux/2025-11-25/tasks/list","params":{}}"#;
        let mut stream = post_raw(&front, Some(&session), spoof).await?;
        let mut seen = String::new();
        read_until(&mut stream, &mut seen, "\"id\":2").await;
        assert!(seen.contains("-32601"), "{seen}");
    }
    Ok(())
}

/// A 2026-07-28 tools/call of `params` to the front: the JSON-RPC answer.
async fn call_2026(front: &Front, id: u32, params: serde_json::Value) -> anyhow::Result<String> {
    let seen = post_2026(front, id, "tools/call", params).await?;
    let start = seen
        .find(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{id}"))
        .unwrap_or(0);
    let end = seen[start..].find('\n').map_or(seen.len(), |n| start + n);
    Ok(seen[start..end].trim().to_owned())
}

/// A 2026-07-28 host over HTTP in front of a 2025-11-25 server that asks during a call by
/// request: the host's call is answered `input_required` with the server's request and a
/// state of planmux's, the call held meanwhile; the retry with the answer gets the
/// server's result; the same retry again finds no call (each hold is resumed once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_servers_request_is_a_2026_http_hosts_question() -> R {
    let old = format!(
        "[servers.old]\ncommand = \"{}\"\nargs = [\"demo\", \"chaos\", \"--legacy\"]\n",
        crate::common::bin()
    );
    let front = Front::start(&old).await?;
    let call = json!({"name": "old__ask_host", "arguments": {"kind": "elicitation"}});
    let mut asked = String::new();
    // The server is up once the front lists it.
    for _ in 0..50 {
        asked = call_2026(&front, 1, call.clone()).await?;
        if asked.contains("input_required") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let asked: serde_json::Value = serde_json::from_str(&asked)?;
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    assert_eq!(
        result["inputRequests"]["q1"]["method"], "elicitation/create",
        "{asked}"
    );
    assert_eq!(
        result["inputRequests"]["q1"]["params"]["message"],
        "Your name?"
    );
    let state = result["requestState"].as_str().unwrap_or_default();
    let mut retry = call.clone();
    retry["requestState"] = json!(state);
    retry["inputResponses"] = json!({"q1": {"action": "accept", "content": {"name": "Grace"}}});
    let answered: serde_json::Value =
        serde_json::from_str(&call_2026(&front, 2, retry.clone()).await?)?;
    assert_eq!(
        answered["result"]["structuredContent"]["answer"]["content"]["name"], "Grace",
        "{answered}"
    );
    let again: serde_json::Value = serde_json::from_str(&call_2026(&front, 3, retry).await?)?;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert!(
        again["error"]["message"]
            .to_string()
            .contains("retried already"),
        "{again}"
    );
    Ok(())
}
