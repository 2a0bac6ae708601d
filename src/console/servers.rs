//! The servers page: each server's state (with why it is not connected: its error and
//! stderr tail, or how to sign in), its tools with their tiers, and the tools
//! `servers.lock` holds back, with what changed and a button that accepts each.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::Page;
use super::html::{badge, button, esc, json};
use crate::downstream::Downstreams;

/// How long a user has to finish a sign-in begun here.
const SIGN_IN_LIMIT: Duration = crate::oauth::login::DEFAULT_TIMEOUT;

/// The page's main part.
pub fn page(downstreams: &Downstreams, csrf: &str) -> String {
    let catalog = downstreams.catalog();
    let mut main = String::from(
        "<h2>Servers</h2><table><tr><th>server</th><th>state</th><th>tools</th><th>started in</th><th>why not connected</th></tr>",
    );
    let statuses = downstreams.statuses();
    for status in &statuses {
        let startup = status
            .startup
            .map_or(String::new(), |d| format!("{} ms", d.as_millis()));
        let mut why = status
            .error
            .as_deref()
            .filter(|_| !status.ready)
            .map_or(String::new(), |e| format!("<pre>{}</pre>", esc(e)));
        if status.state == "needs sign-in"
            && downstreams.signs_in_with_browser(&status.name).is_some()
        {
            why.push_str(&button(
                "/servers/sign-in",
                &[("server", &status.name)],
                "Sign in",
                csrf,
            ));
            why.push_str(" <span class=\"note\">in a browser on planmux's machine: the sign-in comes back to a loopback port</span>");
        }
        let _ = write!(
            main,
            r#"<tr id="server-{name}"><td>{name}</td><td>{}</td><td>{}</td><td>{startup}</td><td>{why}</td></tr>"#,
            badge(status.state),
            status.tools,
            name = esc(&status.name),
        );
    }
    main.push_str("</table>");
    let quarantined = catalog.quarantined();
    if !quarantined.is_empty() {
        main.push_str(
            "<h2>Quarantined tools</h2><p class=\"note\">Held back by servers.lock: not listed, not callable, until accepted (which pins the definition the server offers now).</p>\
             <table><tr><th>tool</th><th>what changed</th><th>the definition</th><th></th></tr>",
        );
        for held in quarantined {
            let pinned = downstreams.pinned(&held.server, &held.tool);
            let now = downstreams
                .offered(&held.server, &held.tool)
                .and_then(|tool| serde_json::to_value(tool).ok())
                .map(|value| changed_parts(pinned.as_ref(), &value, &held.change))
                .unwrap_or_default();
            let _ = write!(
                main,
                r#"<tr class="quarantined" data-tool="{tool}"><td>{tool}</td><td>{}</td><td>{now}</td><td>{}</td></tr>"#,
                esc(&held.change),
                button(
                    "/servers/accept",
                    &[("tool", &held.exported)],
                    "Accept",
                    csrf
                ),
                tool = esc(&held.exported),
            );
        }
        main.push_str("</table>");
    }
    main.push_str("<h2>Tools</h2><table><tr><th>tool</th><th>server</th><th>tier</th><th>description</th></tr>");
    for entry in catalog.entries() {
        let description = entry.definition.description.as_deref().unwrap_or_default();
        let first_line = description.lines().next().unwrap_or_default();
        let _ = write!(
            main,
            r#"<tr class="tool" data-tool="{tool}"><td>{tool}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(&entry.server),
            entry.tier.as_str(),
            esc(first_line),
            tool = esc(entry.exported.as_str()),
        );
    }
    main.push_str("</table>");
    main
}

/// The parts `change` names ("inputSchema, description changed …"): a line diff of each
/// against what the lock pinned, when it keeps that (else as the server defines it now);
/// the whole definition for a new tool.
fn changed_parts(pinned: Option<&Value>, definition: &Value, change: &str) -> String {
    let parts: Vec<&str> = crate::lock::PARTS
        .into_iter()
        .filter(|part| change.contains(part))
        .collect();
    if parts.is_empty() {
        return json(definition);
    }
    let pick = |from: &Value| -> Value {
        let shown: serde_json::Map<String, Value> = parts
            .iter()
            .map(|part| {
                (
                    (*part).to_owned(),
                    from.get(*part).cloned().unwrap_or(Value::Null),
                )
            })
            .collect();
        Value::Object(shown)
    };
    let Some(pinned) = pinned else {
        return format!(
            "<p class=\"note\">as it is now (this servers.lock keeps digests only)</p>{}",
            json(&pick(definition))
        );
    };
    let text = |value: &Value| serde_json::to_string_pretty(value).unwrap_or_default();
    let (was, now) = (text(&pick(pinned)), text(&pick(definition)));
    let mut diff = String::from("<pre class=\"diff\">");
    for change in similar::TextDiff::from_lines(&was, &now).iter_all_changes() {
        let (class, sign) = match change.tag() {
            similar::ChangeTag::Delete => ("del", '-'),
            similar::ChangeTag::Insert => ("ins", '+'),
            similar::ChangeTag::Equal => ("same", ' '),
        };
        let line = change.value().trim_end_matches('\n');
        let _ = write!(diff, "<span class=\"{class}\">{sign} {}</span>", esc(line));
    }
    diff.push_str("</pre>");
    diff
}

/// Begins the sign-in of `server` (OAuth in the browser, as `planmux login` does): the
/// browser goes to the authorization server, whose redirect comes back to planmux's
/// loopback listener; once it has, the server connects. The page to go to, or why not.
pub async fn sign_in(downstreams: &Arc<Downstreams>, server: &str) -> Page {
    let Some(found) = downstreams.signs_in_with_browser(server) else {
        return Page::Refused(format!("'{server}' does not sign in with a browser"));
    };
    if !found.waits_for_sign_in() {
        return Page::SeeOther("/console".into());
    }
    let pending = match crate::oauth::login::begin(&found.config, None).await {
        Ok(pending) => pending,
        Err(why) => return Page::Refused(format!("the sign-in to '{server}' cannot begin: {why}")),
    };
    let url = pending.url().to_owned();
    let (set, name) = (downstreams.clone(), server.to_owned());
    downstreams.track(async move {
        // One sign-in to a server at a time (a host may be offered one too).
        let _turn = found.sign_in_turn().await;
        match pending.finish(SIGN_IN_LIMIT).await {
            Ok(_) => {
                tracing::info!(server = %name, "signed in from the console");
                set.reconnect_signed_in();
            }
            Err(why) => tracing::warn!(server = %name, %why, "a sign-in begun on the console did not finish"),
        }
    });
    Page::SeeOther(url)
}
