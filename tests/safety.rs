//! Safety, end to end: what each server may see of planmux's environment, and what may
//! be printed about them.

mod common;

use std::process::Command;

type R = anyhow::Result<()>;

/// A variable meant for one server reaches that server only, under the name the config
/// gives it; a variable meant for nobody reaches nobody; `env_inherit` lets one through;
/// and no secret appears in any output, whatever the log level. URLs are printed without
/// their credentials.
#[test]
fn each_server_sees_only_its_own_secrets_and_none_is_printed() -> R {
    let dir = tempfile::tempdir()?;
    let bin = common::bin();
    // Each child starts the demo only if its environment is exactly as the config says.
    let config = format!(
        r#"[servers.keyed]
command = "sh"
args = ["-c", "[ \"$API_KEY\" = key-for-keyed ] && [ -z \"$MY_KEY\" ] && [ -z \"$OTHER_TOKEN\" ] && [ -n \"$PATH\" ] && [ -n \"$HOME\" ] && exec {bin} demo chaos"]
env = {{ API_KEY = "${{MY_KEY}}" }}

[servers.plain]
command = "sh"
args = ["-c", "[ -z \"$API_KEY\" ] && [ -z \"$MY_KEY\" ] && [ -z \"$OTHER_TOKEN\" ] && [ -z \"$AWS_REGION\" ] && exec {bin} demo chaos"]

[servers.aws]
command = "sh"
args = ["-c", "[ \"$AWS_REGION\" = eu-west-3 ] && [ -z \"$MY_KEY\" ] && [ -z \"$OTHER_TOKEN\" ] && exec {bin} demo chaos"]
env_inherit = ["AWS_*"]

[servers.remote]
url = "http://user:pw-in-url-xyz@127.0.0.1:9/mcp?key=query-secret-xyz"
headers = {{ Authorization = "Bearer ${{OTHER_TOKEN}}" }}
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
