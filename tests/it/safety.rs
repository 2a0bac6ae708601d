//! Safety, end to end: what each server may see of planmux's environment, and what may
//! be printed about them.

use std::process::Command;

use crate::common;

type R = anyhow::Result<()>;

/// A variable meant for one server reaches that server only, under the name the config
/// gives it; a variable meant for nobody reaches nobody; `env_inherit` lets one through,
/// `[proxy] env_inherit` to every child, and the certificate and proxy variables reach
/// every child; and no secret appears in any output, whatever the log level. URLs are
/// printed without their credentials.
#[test]
fn each_server_sees_only_its_own_secrets_and_none_is_printed() -> R {
    let dir = tempfile::tempdir()?;
    let bin = common::bin();
    // Each child starts the demo only if its environment is exactly as the config says.
    let config = format!(
        r#"[proxy]
env_inherit = ["CORP_*"]

[servers.keyed]
command = "sh"
args = ["-c", "[ \"$API_KEY\" = key-for-keyed ] && [ -z \"$MY_KEY\" ] && [ -z \"$OTHER_TOKEN\" ] && [ -n \"$PATH\" ] && [ -n \"$HOME\" ] && exec {bin} demo chaos"]
env = {{ API_KEY = "${{MY_KEY}}" }}

[servers.plain]
command = "sh"
args = ["-c", "[ -z \"$API_KEY\" ] && [ -z \"$MY_KEY\" ] && [ -z \"$OTHER_TOKEN\" ] && [ -z \"$AWS_REGION\" ] && [ \"$SSL_CERT_FILE\" = /corp/ca.pem ] && [ \"$HTTPS_PROXY\" = http://proxy:3128 ] && [ \"$CORP_REGION\" = north ] && exec {bin} demo chaos"]

[servers.aws]
command = "sh"
args = ["-c", "[ \"$AWS_REGION\" = eu-west-3 ] && [ -z \"$MY_KEY\" ] && [ -z \"$OTHER_TOKEN\" ] && exec {bin} demo chaos"]
env_inherit = ["AWS_*"]

[servers.remote]
url = "http://user:pw-in-url-xyz@127.0.0.1:9/mcp?key=query-secret-xyz"
headers = {{ X-Api-Key = "Bearer ${{OTHER_TOKEN}}" }}
startup_timeout_ms = 3000
"#
    );
    let path = dir.path().join("servers.toml");
    std::fs::write(&path, config)?;
    for command in ["check", "tools"] {
        let out = Command::new(bin)
            .args([command, "--config"])
            .arg(&path)
            .env("MY_KEY", "key-for-keyed")
            .env("OTHER_TOKEN", "token-for-remote-xyz")
            .env("AWS_REGION", "eu-west-3")
            .env("SSL_CERT_FILE", "/corp/ca.pem")
            .env("HTTPS_PROXY", "http://proxy:3128")
            .env("CORP_REGION", "north")
            .env("RUST_LOG", "trace")
            .output()?;
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if command == "check" {
            for server in ["keyed", "plain", "aws"] {
                let line = all.lines().find(|l| l.starts_with(server)).unwrap_or("");
                assert!(line.contains(" ok "), "{server}: {line}\n{all}");
            }
            assert!(all.contains("http://***@127.0.0.1:9/mcp?***"), "{all}");
        }
        for secret in [
            "key-for-keyed",
            "token-for-remote-xyz",
            "pw-in-url-xyz",
            "query-secret-xyz",
        ] {
            assert!(
                !all.contains(secret),
                "`{command}` printed {secret}:\n{all}"
            );
        }
    }
    Ok(())
}

/// A server whose config needs a variable that is not set fails alone, named with the
/// variable and the key: the other's tools are listed and callable, a call to its tools
/// says why, and `planmux check` names the variable. A child whose stderr shows a
/// certificate failure is reported with how to fix it.
#[tokio::test]
async fn a_server_needing_an_unset_variable_fails_alone() -> R {
    use common::{call, demo_server, start};
    use serde_json::json;

    let config = format!(
        "{}{}[servers.tls]\ncommand = \"sh\"\nargs = [\"-c\", \"echo 'Error: invalid peer certificate: UnknownIssuer' >&2; exit 1\"]\n",
        demo_server("chaos", "chaos", ""),
        demo_server(
            "notion",
            "weather",
            "env = { NOTION_TOKEN = \"${PLANMUX_TEST_UNSET_VAR}\" }"
        ),
    );
    let proxy = start(&config).await?;
    let listed = proxy.tool_names().await?;
    assert!(listed.contains(&"chaos__echo".to_string()), "{listed:?}");
    assert!(
        !listed.iter().any(|t| t.starts_with("notion__")),
        "{listed:?}"
    );
    proxy
        .client
        .call_tool(call("chaos__echo", json!({"a": 1})))
        .await?;
    let called = proxy
        .client
        .call_tool(call("notion__get_forecast", json!({})))
        .await?;
    let said = common::text(&called);
    assert!(
        said.contains("server 'notion' is configured but failed to start")
            && said.contains("PLANMUX_TEST_UNSET_VAR (in `env`)"),
        "{said}"
    );

    let out = proxy.command("check").output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = |server: &str| stdout.lines().find(|l| l.starts_with(server)).unwrap_or("");
    assert!(line("chaos").contains(" ok "), "{stdout}");
    assert!(
        line("notion").contains("FAILED") && line("notion").contains("PLANMUX_TEST_UNSET_VAR"),
        "{stdout}"
    );
    assert!(
        line("tls").contains("this looks like a TLS certificate problem"),
        "{stdout}"
    );
    Ok(())
}

/// One checkpoint for every path: a denied tool is neither listed nor callable, directly
/// or in a plan, and every decision (tool, tier, path, plan and step) lands in the audit
/// log. `planmux tools` shows each tool's tier.
#[tokio::test]
async fn every_call_passes_the_checkpoint_and_is_audited() -> R {
    use common::{call, json, start};
    use serde_json::{Value, json};

    let config = "[proxy]\naudit_log = \"audit.jsonl\"\n\
        [policy]\ndeny = [\"chaos__fail\", \"chaos__toggle*\"]\n\
        [servers.chaos]\nbuiltin = \"chaos\"\ntiers = { \"echo\" = \"write\" }\n";
    let proxy = start(config).await?;
    let listed = proxy.tool_names().await?;
    assert!(listed.contains(&"chaos__echo".to_string()), "{listed:?}");
    assert!(
        !listed
            .iter()
            .any(|t| t == "chaos__fail" || t.starts_with("chaos__toggle")),
        "denied tools are listed: {listed:?}"
    );
    let refused = proxy.client.call_tool(call("chaos__fail", json!({}))).await;
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("denied by [policy] deny"), "{message}");
    proxy
        .client
        .call_tool(call("chaos__echo", json!({"a": 1})))
        .await?;
    let plan = json!({"steps": [
        {"id": "e", "tool": "chaos__echo", "args": {"b": 2}},
        {"id": "s", "tool": "chaos__sleep", "args": {"ms": 1}}
    ]});
    // echo is a write tool here: the plan needs approval, relayed through approve_plan.
    let asked = proxy.client.call_tool(call("execute_plan", plan)).await?;
    let approval = json(&asked)["structuredContent"]["approval"].clone();
    let ran = proxy
        .client
        .call_tool(call("approve_plan", approval.clone()))
        .await?;
    let run_id = json(&ran)["structuredContent"]["run_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let denied_plan = json!({"steps": [{"id": "f", "tool": "chaos__fail"}]});
    let invalid = proxy
        .client
        .call_tool(call("execute_plan", denied_plan))
        .await?;
    assert_eq!(invalid.is_error, Some(true));
    // Named as denied, as a direct call is, not as unknown with look-alikes to try.
    let said = common::text(&invalid);
    assert!(
        said.contains("\"chaos__fail\" is denied by [policy] deny")
            && !said.contains("did you mean"),
        "{said}"
    );
    // So is a step naming it by server and bare name (seed 002's serverId, toolName).
    let seed_form = json!({"planType": "SEQUENTIAL", "steps": [
        {"id": "f", "serverId": "chaos", "toolName": "fail", "parameters": {}, "dependencies": []}
    ]});
    let invalid = proxy
        .client
        .call_tool(call("execute_plan", seed_form))
        .await?;
    let said = common::text(&invalid);
    assert!(said.contains("is denied by [policy] deny"), "{said}");

    let audit = std::fs::read_to_string(proxy.dir.path().join("audit.jsonl"))?;
    let entries: Vec<Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let find = |tool: &str, path: &str| {
        entries
            .iter()
            .find(|e| e["tool"] == tool && e["path"] == path)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let denied = find("chaos__fail", "direct");
    assert_eq!(
        (denied["decision"].as_str(), denied["tier"].as_str()),
        (Some("deny"), Some("unknown")),
        "{audit}"
    );
    let direct = find("chaos__echo", "direct");
    assert_eq!(
        (direct["decision"].as_str(), direct["tier"].as_str()),
        (Some("allow"), Some("write")),
        "{audit}"
    );
    let approved = entries
        .iter()
        .find(|e| e["tool"] == "chaos__echo" && e["decision"] == "approved")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        (approved["step"].as_str(), approved["approved_by"].as_str()),
        (Some("e"), Some("token")),
        "{audit}"
    );
    let echo_step = find("chaos__echo", "plan");
    assert_eq!(
        (
            echo_step["decision"].as_str(),
            echo_step["tier"].as_str(),
            echo_step["run"].as_str(),
            echo_step["approved_by"].as_str()
        ),
        (
            Some("allow"),
            Some("write"),
            Some(run_id.as_str()),
            Some("token")
        ),
        "{audit}"
    );
    let step = find("chaos__sleep", "plan");
    assert_eq!(
        (
            step["decision"].as_str(),
            step["tier"].as_str(),
            step["run"].as_str(),
            step["step"].as_str()
        ),
        (
            Some("allow"),
            Some("read"),
            Some(run_id.as_str()),
            Some("s")
        ),
        "{audit}"
    );
    assert!(
        !audit.contains("\"chaos__fail\",\"path\":\"plan\""),
        "a denied tool ran in a plan: {audit}"
    );
    proxy.client.cancel().await?;

    let dir = tempfile::tempdir()?;
    let path = dir.path().join("servers.toml");
    std::fs::write(&path, config)?;
    let out = Command::new(common::bin())
        .args(["tools", "--config"])
        .arg(&path)
        .output()?;
    let table = String::from_utf8_lossy(&out.stdout);
    let tier_of = |tool: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{tool} ")))
            .and_then(|l| l.split_whitespace().nth(1))
            .map(str::to_owned)
    };
    assert_eq!(tier_of("chaos__echo").as_deref(), Some("write"), "{table}");
    assert_eq!(tier_of("chaos__sleep").as_deref(), Some("read"), "{table}");
    assert_eq!(tier_of("chaos__pid").as_deref(), Some("read"), "{table}");
    assert_eq!(
        tier_of("chaos__ask_host").as_deref(),
        Some("read"),
        "{table}"
    );
    assert_eq!(tier_of("chaos__fail"), None, "{table}");
    Ok(())
}

/// Tool pinning: `planmux lock` records every definition; a tool whose definition
/// changed, or a new tool of a locked server, is quarantined (not listed, not callable,
/// shown by `check`, and the host is told) until the lock is written again, which a
/// running planmux reads at once; a broken lock holds everything back.
#[tokio::test]
async fn changed_and_new_tools_are_quarantined_until_locked_again() -> R {
    use common::{Recorder, call};
    use rmcp::ServiceExt;
    use rmcp::transport::TokioChildProcess;
    use serde_json::{Value, json};

    let dir = tempfile::tempdir()?;
    let config = dir.path().join("servers.toml");
    std::fs::write(&config, "[servers.chaos]\nbuiltin = \"chaos\"\n")?;
    let run = |command: &str| {
        Command::new(common::bin())
            .args([command, "--config"])
            .arg(&config)
            .output()
    };
    let locked = run("lock")?;
    assert_eq!(
        locked.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&locked.stderr)
    );
    assert!(String::from_utf8_lossy(&locked.stdout).contains("locked 9 tools of 1 servers"));
    assert_eq!(
        run("check")?.status.code(),
        Some(0),
        "a fresh lock holds nothing back"
    );

    // Pretend echo's description changed and pid appeared after the lock.
    let lock_path = dir.path().join("servers.lock");
    let mut lock: Value = serde_json::from_str(&std::fs::read_to_string(&lock_path)?)?;
    lock["servers"]["chaos"]["echo"]["description"] = json!("0000");
    if let Some(tools) = lock["servers"]["chaos"].as_object_mut() {
        tools.remove("pid");
    }
    std::fs::write(&lock_path, lock.to_string())?;
    let checked = run("check")?;
    let report = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(1), "{report}");
    assert!(
        report.contains("chaos__echo  description changed since planmux lock"),
        "{report}"
    );
    assert!(
        report.contains("chaos__pid  new since planmux lock"),
        "{report}"
    );

    let mut cmd = tokio::process::Command::new(common::bin());
    cmd.arg("serve").arg("--config").arg(&config);
    let log = dir.path().join(common::LOG);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let recorder = Recorder::default();
    let client = recorder.clone().serve(transport).await?;
    let listed: Vec<String> = client
        .list_all_tools()
        .await?
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(
        !listed
            .iter()
            .any(|t| t == "chaos__echo" || t == "chaos__pid"),
        "{listed:?}"
    );
    assert!(listed.iter().any(|t| t == "chaos__sleep"), "{listed:?}");
    let refused = client.call_tool(call("chaos__echo", json!({}))).await;
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains("quarantined: description changed since planmux lock"),
        "{message}"
    );
    let planned = client
        .call_tool(call(
            "execute_plan",
            json!({"steps": [{"id": "e", "tool": "chaos__echo", "args": {}}]}),
        ))
        .await?;
    let said = common::text(&planned);
    assert!(
        said.contains("\"chaos__echo\" is quarantined: description changed since planmux lock"),
        "{said}"
    );
    // A tool that appears at run time is held back too, and the host is told.
    client
        .call_tool(call("chaos__toggle_extra", json!({})))
        .await?;
    let told = common::eventually(std::time::Duration::from_secs(10), || {
        recorder.seen.lock().is_ok_and(|seen| {
            seen.logs.iter().any(|l| {
                l.to_string()
                    .contains("planmux quarantined chaos__extra: new since planmux lock")
            })
        })
    })
    .await;
    assert!(told, "the host was not told");

    // A lock that vanishes while planmux runs does not turn pinning off.
    let kept = dir.path().join("servers.lock.kept");
    std::fs::rename(&lock_path, &kept)?;
    let looked = common::logged(&log, "servers.lock is gone").await;
    assert!(looked, "planmux never looked at the missing lock");
    let listed = client.list_all_tools().await?;
    assert!(
        !listed.iter().any(|t| t.name == "chaos__echo"),
        "a missing lock let a quarantined tool out"
    );
    std::fs::rename(&kept, &lock_path)?;

    // Accepting the changes: lock again. The running planmux reads the new lock (hot
    // reload): echo leaves quarantine, without a restart.
    assert_eq!(run("lock")?.status.code(), Some(0));
    assert_eq!(run("check")?.status.code(), Some(0));
    let mut released = false;
    for _ in 0..100 {
        let tools = client.list_all_tools().await?;
        if tools.iter().any(|t| t.name == "chaos__echo") {
            released = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(released, "the new lock was not read by the running planmux");
    let echoed = client
        .call_tool(call("chaos__echo", json!({"back": true})))
        .await?;
    assert_ne!(echoed.is_error, Some(true));
    client.cancel().await?;
    // A broken lock fails closed.
    std::fs::write(&lock_path, "{")?;
    let broken = run("check")?;
    assert_eq!(broken.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&broken.stdout).contains("not a planmux lock file"));
    Ok(())
}

/// The only way to a downstream tool takes the checkpoint's proof. The compiler holds
/// most of it (`Server::call`, and `LineRoute::send_now`, `send` and `call` take
/// `&Authorized`, whose field is private to `policy`); this test holds the rest: a
/// `tools/call` request is built in three places (rmcp's typed one, a plan step's raw one,
/// and the task call of a 2025-11-25 HTTP server, which rmcp does not model), each behind
/// the proof (the typed one reached from `Server::call` and from a raw call
/// already sent by `LineRoute`), and only `Policy::authorize` makes a proof. A
/// new path that builds its own request, or calls a peer's `call_tool`, fails here.
#[test]
fn only_the_checkpoint_opens_the_way_to_a_downstream_tool() -> R {
    let mut builds = Vec::new();
    let mut proofs = Vec::new();
    let mut declaring = Vec::new();
    // Unit tests act as hosts, calling planmux itself: not a way to a downstream.
    for (name, text) in common::sources()? {
        let code = common::code(&name, &text);
        let mut function = String::new();
        let mut authorized = false;
        for line in code.lines() {
            if line.trim_start().starts_with("pub") && line.contains(" fn ")
                || line.trim_start().starts_with("fn ")
                || line.trim_start().starts_with("async fn ")
            {
                function = line.trim().to_owned();
                authorized = false;
            }
            // Authorized here, or handed the checkpoint's proof (a `&Authorized`
            // parameter, which only `Policy::authorize` can make).
            authorized |= line.contains(".authorize(") || line.contains(": &Authorized");
            if line.contains("CallToolRequest::new(")
                || line.contains(r#"CustomRequest::new("tools/call""#)
                || line.contains("call_tool_once(")
                || line.contains(r#""method":"tools/call""#)
            {
                builds.push(format!("{name}: {function}"));
            }
            if line.contains(".call_declaring(") {
                declaring.push(format!("{name}: {function}"));
            }
            if line.contains(".call_tool(") {
                assert!(
                    authorized && line.contains("proof"),
                    "{name}: `{function}` calls a tool without the checkpoint's proof: {line}"
                );
            }
            if line.contains("Authorized {")
                && !line.contains("struct Authorized")
                && !line.contains("impl Authorized")
            {
                proofs.push(format!("{name}: {function}"));
            }
        }
    }
    builds.sort();
    assert_eq!(
        builds,
        [
            "downstream/route.rs: pub(crate) async fn call(",
            "downstream/server/inputs.rs: pub(super) async fn call_declaring(",
            "downstream/server/tasks.rs: pub(super) async fn call_legacy_task("
        ],
        "a tools/call is built outside Server::call_declaring, Server::call_legacy_task and LineRoute::call"
    );
    // rmcp's typed call is made by `Server::call` (which takes the proof), and by a line
    // connection's call whose tool runs only as a task, sent again on the typed path: that
    // call took its proof when `LineRoute` sent it.
    declaring.sort();
    assert_eq!(
        declaring,
        [
            "downstream/server/inputs.rs: pub(crate) async fn call(",
            "downstream/server/tasks.rs: pub(super) async fn run_as_task(self: Arc<Self>, turn: InputTurn) {"
        ],
        "Server::call_declaring is reached another way"
    );
    // Each way to a downstream tool takes a proof: rmcp's typed call, and the one send of
    // a line connection's calls (at once, after an admission wait, for a plan step).
    for (file, function) in [
        ("downstream/server/inputs.rs", "pub(crate) async fn call("),
        (
            "downstream/server/tasks.rs",
            "pub(super) async fn call_legacy_task(",
        ),
        ("downstream/route.rs", "pub fn send_now("),
        ("downstream/route.rs", "pub async fn send("),
        ("downstream/route.rs", "pub(crate) async fn call("),
    ] {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("src")
                .join(file),
        )?;
        let signature = text
            .split(function)
            .nth(1)
            .and_then(|rest| rest.split(") ->").next())
            .unwrap_or_default();
        assert!(
            signature.contains("&Authorized"),
            "{file}: {function}{signature}"
        );
    }
    assert_eq!(
        proofs,
        ["policy.rs: pub fn authorize("],
        "a proof of authorization is made outside Policy::authorize"
    );
    Ok(())
}
