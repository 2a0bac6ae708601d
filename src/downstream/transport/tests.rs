//! Opening connections: what a child's environment holds, what its stderr tells about a
//! certificate failure, and a server whose config needs an unset variable failing alone.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::config::Config;
use crate::downstream::Downstreams;

/// A tail holding `lines`, as the stderr reader leaves it.
fn tail(lines: &[&str]) -> StderrTail {
    let tail = StderrTail::default();
    for line in lines {
        tail.push((*line).to_owned());
    }
    tail
}

/// Each line a child may print when it does not trust a certificate gets the hint; other
/// failures do not.
#[test]
fn a_certificate_failure_in_stderr_gets_the_hint() {
    let cases: &[(&str, bool)] = &[
        ("Error: invalid peer certificate: UnknownIssuer", true),
        (
            "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED]",
            true,
        ),
        (
            "curl: (60) SSL certificate problem: certificate verify failed",
            true,
        ),
        ("unable to get local issuer certificate", true),
        ("Error: SELF_SIGNED_CERT_IN_CHAIN", true),
        ("code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'", true),
        ("Error: unable to verify the first certificate", true),
        ("Error: self signed certificate in certificate chain", true),
        ("Error: self-signed certificate in certificate chain", true),
        ("TypeError: fetch failed", false),
        ("Error: Cannot find module 'x'", false),
    ];
    for (line, hinted) in cases {
        let described = tail(&["starting", line]).describe();
        assert_eq!(described.contains(TLS_HINT), *hinted, "{line}: {described}");
        assert!(described.contains(line), "{described}");
    }
    assert_eq!(tail(&[]).describe(), "", "no stderr, nothing to say");
}

/// What a user reads when a child exits over a certificate its network replaced.
#[test]
fn the_tls_hint_as_read() {
    let described = tail(&[
        "Listening on stdio",
        "Error: invalid peer certificate: UnknownIssuer",
    ])
    .describe();
    insta::assert_snapshot!("tls_hint", format!("the server exited{described}"));
}

/// A child sees the trust and proxy variables, what `[proxy] env_inherit` and its own
/// `env_inherit` match, and its `env`; nothing else of planmux's environment.
#[tokio::test]
async fn a_child_sees_the_network_variables_and_what_env_inherit_matches() {
    let text = "[proxy]\nenv_inherit = [\"X_*\"]\n\
        [servers.s]\ncommand = \"sh\"\nenv_inherit = [\"OWN_*\"]\n";
    let config = Config::parse(text, "test", Path::new("."), &|_| None).expect("a config");
    let Transport::Stdio { env_inherit, .. } = &config.servers[0].transport else {
        panic!("a stdio server");
    };
    let var = |name: &str, value: &str| (OsString::from(name), OsString::from(value));
    let parent = [
        var("PATH", &std::env::var("PATH").unwrap_or_default()),
        var("SSL_CERT_FILE", "/etc/corp-ca.pem"),
        var("https_proxy", "http://proxy:3128"),
        var("NO_PROXY", "localhost"),
        var("X_FOO", "foo"),
        var("OWN_BAR", "bar"),
        var("SECRET", "other-servers-secret"),
        var("Y_FOO", "y"),
    ];
    let script =
        "echo \"$SSL_CERT_FILE|$https_proxy|$NO_PROXY|$X_FOO|$OWN_BAR|$SET|$SECRET|$Y_FOO\"";
    let args = ["-c".to_owned(), script.to_owned()];
    let env = BTreeMap::from([("SET".to_owned(), "set".to_owned())]);
    let out = child_command("sh", &args, None, &env, env_inherit.as_ref(), parent)
        .output()
        .await
        .expect("sh runs");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        "/etc/corp-ca.pem|http://proxy:3128|localhost|foo|bar|set||"
    );
}

/// A server whose config needs an unset variable fails alone, with the variable and the
/// key named; the other starts and its tools are listed.
#[tokio::test]
async fn a_server_needing_an_unset_variable_fails_alone() {
    let text = "[servers.metrics]\nbuiltin = \"metrics\"\n\
        [servers.notion]\nbuiltin = \"weather\"\ncwd = \"${PLANMUX_TEST_UNSET_VAR}/x\"\n";
    let config = Config::parse(text, "test", Path::new("."), &|_| None).expect("a config");
    let downstreams = Downstreams::start(&config, Arc::default()).await;
    let statuses = downstreams.statuses();
    let called = downstreams.never_started("notion__forecast");
    downstreams.shutdown().await;
    let status = |name: &str| statuses.iter().find(|s| s.name == name).expect(name);
    assert!(status("metrics").ready && status("metrics").tools > 0);
    let error = status("notion").error.clone().unwrap_or_default();
    assert!(
        !status("notion").ready && error.contains("PLANMUX_TEST_UNSET_VAR (in `cwd`)"),
        "{error}"
    );
    let called = called.map(|e| e.to_string()).unwrap_or_default();
    insta::assert_snapshot!("unset_variable_call", called);
}
