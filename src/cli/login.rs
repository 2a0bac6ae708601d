//! `planmux login SERVER` and `planmux logout SERVER`: a remote server's OAuth sign-in,
//! made in the browser and kept for `planmux serve` (`crate::oauth`), or forgotten.

use std::io::Write as _;

use super::Report;
use crate::config::{Config, ServerConfig, Transport};
use crate::oauth::login::Options;
use crate::oauth::store::Store;

/// `planmux login SERVER`.
pub async fn login(config: &Config, server: &str, options: &Options) -> Report {
    let mut report = Report::new();
    let Some(found) = find(config, server, &mut report) else {
        return report;
    };
    // The URL must reach the user while planmux waits: written at once, not at the end.
    let mut say = |line: &str| {
        let _ = writeln!(std::io::stderr(), "{line}");
    };
    match crate::oauth::login::login(found, options, &mut say).await {
        Ok(signed_in) => {
            let scopes = if signed_in.scopes.is_empty() {
                "none named".to_owned()
            } else {
                signed_in.scopes.join(" ")
            };
            let issuer = signed_in
                .issuer
                .as_deref()
                .unwrap_or("its authorization server");
            report.out(format_args!(
                "signed in to '{server}' (issuer {issuer}; scopes: {scopes}); a running planmux uses it at its next call"
            ));
        }
        Err(e) if e.contains(&format!("'{server}'")) => report.fail(&anyhow::Error::msg(e)),
        Err(e) => report.fail(&anyhow::anyhow!("cannot sign in to '{server}': {e}")),
    }
    report
}

/// `planmux logout SERVER`.
pub fn logout(config: &Config, server: &str) -> Report {
    let mut report = Report::new();
    let Some(found) = find(config, server, &mut report) else {
        return report;
    };
    let Transport::Http { url, .. } = &found.transport else {
        report.fail(&anyhow::anyhow!(
            "server '{server}' is not a remote (url) server: it has no sign-in"
        ));
        return report;
    };
    match Store::new(server, url).and_then(|store| store.remove()) {
        Ok(true) => report.out(format_args!(
            "signed out of '{server}': its tokens are deleted"
        )),
        Ok(false) => report.out(format_args!("'{server}' had no sign-in kept")),
        Err(e) => report.fail(&anyhow::Error::msg(e)),
    }
    report
}

/// The server named `name`, or the failure that says there is none.
fn find<'a>(config: &'a Config, name: &str, report: &mut Report) -> Option<&'a ServerConfig> {
    let found = config.servers.iter().find(|s| s.name == name);
    if found.is_none() {
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        report.fail(&anyhow::anyhow!(
            "{}: no server '{name}' (servers: {})",
            config.source,
            names.join(", ")
        ));
    }
    found
}
