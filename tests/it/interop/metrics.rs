//! `[telemetry] metrics = true` (DESIGN §15), scraped by a real Prometheus (Debian's,
//! started here on a free port with the front's bearer token) and queried through its
//! HTTP API after planmux served direct calls, a failing call, plans and an approval.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::front_auth::{Session, client};
use super::support::{Listening, free_port};

type R = anyhow::Result<()>;

const TOKEN: &str = "metrics-test-token-0123456789";

/// What Prometheus's HTTP API answers for `query`: each series' labels and value.
async fn query(prometheus: &str, query: &str) -> anyhow::Result<Vec<(Value, f64)>> {
    let query: String = url::form_urlencoded::byte_serialize(query.as_bytes()).collect();
    let answer: Value = client()
        .get(format!("{prometheus}/api/v1/query?query={query}"))
        .send()
        .await?
        .json()
        .await?;
    Ok(answer["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|series| {
            let value = series["value"][1].as_str()?.parse().ok()?;
            Some((series["metric"].clone(), value))
        })
        .collect())
}

/// The one value of `wanted`, once Prometheus has scraped it (within 30 s).
async fn scraped(prometheus: &str, wanted: &str) -> anyhow::Result<f64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some((_, value)) = query(prometheus, wanted)
            .await
            .ok()
            .and_then(|v| v.first().cloned())
        {
            return Ok(value);
        }
        anyhow::ensure!(Instant::now() < deadline, "Prometheus never had {wanted}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Calls, errors and latency per server and tool, plans and steps by status, approvals
/// and the servers up reach a Prometheus that scrapes `/metrics` with the front's token;
/// without it `/metrics` answers 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prometheus_scrapes_what_planmux_served() -> R {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    std::fs::write(
        &config,
        format!(
            "[telemetry]\nmetrics = true\n\n[http]\ntokens = [\"{TOKEN}\"]\n\n\
             [servers.chaos]\nbuiltin = \"chaos\"\n\n[servers.weather]\nbuiltin = \"weather\"\n\n\
             [servers.files]\nbuiltin = \"files\"\ncwd = \"sandbox\"\n"
        ),
    )?;
    let config = config.to_string_lossy().into_owned();
    let planmux = Listening::start(&["serve", "--http"], &["--config", &config]).await?;
    let url = planmux.url();
    let session = Session::open(&url, TOKEN).await?;
    let call = |name: &str, arguments: Value| json!({"name": name, "arguments": arguments});
    for n in 0..3 {
        session
            .ask("tools/call", call("chaos__echo", json!({"n": n})))
            .await?;
    }
    let failed = session
        .ask("tools/call", call("chaos__fail", json!({})))
        .await?;
    assert_eq!(failed["isError"], true, "{failed}");
    let plan = json!({"steps": [{"id": "w", "tool": "weather__get_weather", "args": {"location": "Oslo"}}]});
    let ran = session
        .ask("tools/call", call("execute_plan", plan))
        .await?;
    assert_eq!(ran["structuredContent"]["status"], "succeeded", "{ran}");
    let writing = json!({"steps": [{"id": "save", "tool": "files__write_file",
        "args": {"path": "note.txt", "content": "hi"}}]});
    let asked = session
        .ask("tools/call", call("execute_plan", writing))
        .await?;
    let approval = &asked["structuredContent"]["approval"];
    let approve = json!({"token": approval["token"], "steps": approval["steps"]});
    let approved = session
        .ask("tools/call", call("approve_plan", approve))
        .await?;
    assert_eq!(
        approved["structuredContent"]["status"], "succeeded",
        "{approved}"
    );

    let metrics_url = url.replace("/mcp", "/metrics");
    let refused = client().get(&metrics_url).send().await?;
    assert_eq!(refused.status().as_u16(), 401);
    let text = client()
        .get(&metrics_url)
        .bearer_auth(TOKEN)
        .send()
        .await?
        .text()
        .await?;
    assert!(
        text.contains("planmux_tool_calls_total{server=\"chaos\",tool=\"echo\"} 3"),
        "{text}"
    );

    let port = free_port();
    let prometheus = format!("http://127.0.0.1:{port}");
    let scrape = dir.path().join("prometheus.yml");
    let target = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    std::fs::write(
        &scrape,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: planmux\n    \
             authorization:\n      credentials: {TOKEN}\n    static_configs:\n      - targets: [\"{target}\"]\n"
        ),
    )?;
    let _prometheus = tokio::process::Command::new("prometheus")
        .arg(format!("--config.file={}", scrape.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("prometheus (scripts/install-interop installs it): {e}"))?;

    for (series, expected) in [
        ("up{job=\"planmux\"}", 1.0),
        (
            "planmux_tool_calls_total{server=\"chaos\",tool=\"echo\"}",
            3.0,
        ),
        (
            "planmux_tool_call_duration_seconds_count{server=\"chaos\",tool=\"echo\"}",
            3.0,
        ),
        (
            "planmux_tool_call_errors_total{server=\"chaos\",tool=\"fail\"}",
            1.0,
        ),
        (
            "planmux_tool_calls_total{server=\"weather\",tool=\"get_weather\"}",
            1.0,
        ),
        (
            "planmux_tool_calls_total{server=\"files\",tool=\"write_file\"}",
            1.0,
        ),
        ("planmux_plans_total{status=\"succeeded\"}", 2.0),
        ("planmux_plan_steps_total{status=\"succeeded\"}", 2.0),
        ("planmux_approvals_total{decision=\"asked\"}", 1.0),
        ("planmux_approvals_total{decision=\"granted\"}", 1.0),
        ("planmux_server_up{server=\"weather\"}", 1.0),
        ("planmux_sessions", 1.0),
    ] {
        assert_eq!(scraped(&prometheus, series).await?, expected, "{series}");
    }
    assert!(
        query(&prometheus, "planmux_tool_call_errors_total{tool=\"echo\"}")
            .await?
            .is_empty()
    );
    let slowest = scraped(&prometheus, "max(planmux_tool_call_duration_seconds_sum)").await?;
    assert!(slowest > 0.0, "{slowest}");
    Ok(())
}
