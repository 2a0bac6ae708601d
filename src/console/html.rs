//! The console's HTML: the frame every page shares, its styles and live script, escaping,
//! and the pages small enough to need no module (sign-in, audit).

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

use crate::policy::Decision;

/// The most of a value a page shows (arguments, outputs), in characters.
const SHOWN_CHARS: usize = 4_000;

/// Keeps a page live: its main part is asked for again every `LIVE_MS` ms, unless the
/// user is typing in it or the page is hidden.
pub const LIVE_SCRIPT: &str = r#"(function () {
  const every = Number(document.body.dataset.live || 0);
  if (!every) return;
  async function again() {
    const main = document.querySelector('main');
    const busy = document.activeElement && main.contains(document.activeElement)
      && document.activeElement.matches('input, textarea, select');
    if (!document.hidden && !busy) {
      try {
        const answer = await fetch(location.href, {headers: {'X-Planmux-Live': '1'}, credentials: 'same-origin'});
        if (answer.ok) { main.innerHTML = await answer.text(); document.body.dataset.updated = String(Date.now()); }
      } catch (e) { /* the next turn tries again */ }
    }
    setTimeout(again, every);
  }
  setTimeout(again, every);
})();
"#;

const STYLE: &str = "
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:24px;align-items:center}
header a{color:#cfd6e4;text-decoration:none}header a.here{color:#fff;font-weight:600}
header b{margin-right:12px}main{padding:16px 20px;max-width:1200px}
table{border-collapse:collapse;width:100%;background:#fff;margin:8px 0 18px}
th,td{border-bottom:1px solid #e3e6eb;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}pre{margin:0;white-space:pre-wrap;word-break:break-word;font-size:12px;max-height:240px;overflow:auto}
.badge{padding:1px 7px;border-radius:9px;font-size:12px;color:#fff}
.badge.ok,.badge.connected,.badge.succeeded,.badge.allow,.badge.approved{background:#2f8f4e}.badge.failed,.badge.deny,.badge.declined,.badge.timed_out{background:#c0392b}
.badge.starting,.badge.partial,.badge.skipped,.badge.cancelled,.badge.running{background:#b7791f}.badge.waiting{background:#9aa3b5}.badge.needs-sign-in,.badge.closed{background:#6b7280}
button{padding:3px 10px;cursor:pointer}.note{color:#5b6475}svg{background:#fff;border:1px solid #e3e6eb}
form.inline{display:inline}.diff span{display:block}.diff .del{background:#fbe0dd}.diff .ins{background:#dcf3e2}h2{margin:18px 0 6px;font-size:17px}
";

/// `text` made safe inside HTML text and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A value as indented JSON, cut at [`SHOWN_CHARS`] (saying so), escaped.
pub fn json(value: &Value) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    if text.chars().count() <= SHOWN_CHARS {
        return format!("<pre>{}</pre>", esc(&text));
    }
    let cut: String = text.chars().take(SHOWN_CHARS).collect();
    let whole = text.len();
    format!("<pre>{}\n… ({whole} bytes in all)</pre>", esc(&cut))
}

/// A status as a coloured badge.
pub fn badge(status: &str) -> String {
    let class = status.replace(' ', "-");
    format!(
        r#"<span class="badge {}">{}</span>"#,
        esc(&class),
        esc(status)
    )
}

/// A form posting `fields` (and the CSRF token) to `action`, as one button.
pub fn button(action: &str, fields: &[(&str, &str)], label: &str, csrf: &str) -> String {
    let mut form = format!(r#"<form class="inline" method="post" action="/console{action}">"#);
    for (name, value) in fields.iter().chain([&("csrf", csrf)]) {
        let _ = write!(
            form,
            r#"<input type="hidden" name="{}" value="{}">"#,
            esc(name),
            esc(value)
        );
    }
    let _ = write!(form, "<button>{}</button></form>", esc(label));
    form
}

/// A whole page: the header with its links, and `main`.
pub fn layout(title: &str, main: &str) -> String {
    let mut links = String::new();
    for (name, href) in [
        ("Servers", "/console"),
        ("Runs", "/console/runs"),
        ("Approvals", "/console/approvals"),
        ("Audit", "/console/audit"),
    ] {
        let here = if name == title || (title == "Run" && name == "Runs") {
            r#" class="here""#
        } else {
            ""
        };
        let _ = write!(links, r#"<a href="{href}"{here}>{name}</a>"#);
    }
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>planmux · {title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>
<body data-live="{live}"><header><b>planmux</b>{links}</header><main>{main}</main>
<script src="/console/live.js"></script></body></html>"#,
        title = esc(title),
        live = super::LIVE_MS,
    )
}

/// The sign-in page, saying why the last try failed.
pub fn sign_in(why: Option<&str>) -> String {
    let why = why.map_or(String::new(), |why| {
        format!(r#"<p class="note">{}</p>"#, esc(why))
    });
    let main = format!(
        r#"<h2>Sign in</h2>{why}<p>This planmux asks for a token: one of <code>[http] tokens</code>, or a JWT of the <code>[http.auth]</code> issuer.</p>
<form method="post" action="/console/sign-in"><input type="password" name="token" size="60" autocomplete="off" autofocus> <button>Sign in</button></form>"#
    );
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>planmux · sign in</title><style>{STYLE}</style></head><body><header><b>planmux</b></header><main>{main}</main></body></html>"#
    )
}

/// The audit page: the decisions kept in memory, newest first, those `query` filters
/// for (`tool`, `caller`, `run`: parts of the value).
pub fn audit(decisions: &[Decision], query: &HashMap<String, String>) -> String {
    let wanted = |key: &str| query.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
    let (tool, caller, run) = (wanted("tool"), wanted("caller"), wanted("run"));
    let has = |value: Option<&str>, part: Option<&str>| match part {
        None => true,
        Some(part) => value.is_some_and(|v| v.contains(part)),
    };
    let shown: Vec<&Decision> = decisions
        .iter()
        .filter(|d| {
            has(Some(&d.tool), tool)
                && has(d.caller.as_deref(), caller)
                && has(d.run.as_deref(), run)
        })
        .collect();
    let field = |name: &str, value: Option<&str>| {
        format!(
            r#"<label>{name} <input name="{name}" value="{}" size="18"></label> "#,
            esc(value.unwrap_or_default())
        )
    };
    let mut main = format!(
        r#"<h2>Audit</h2><form method="get" action="/console/audit">{}{}{}<button>Filter</button></form>
<p class="note">{} of the last {} decisions (every call the checkpoint decided, every answer to an approval)</p>
<table><tr><th>time (UTC)</th><th>tool</th><th>tier</th><th>path</th><th>decision</th><th>caller</th><th>run</th><th>step</th><th>approved by</th></tr>"#,
        field("tool", tool),
        field("caller", caller),
        field("run", run),
        shown.len(),
        decisions.len(),
    );
    for d in shown {
        let run = d.run.as_deref().map_or(String::new(), |r| {
            format!(r#"<a href="/console/runs/{0}">{0}</a>"#, esc(r))
        });
        let _ = write!(
            main,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{run}</td><td>{}</td><td>{}</td></tr>",
            time(d.time_ms),
            esc(&d.tool),
            d.tier,
            d.path,
            badge(d.decision),
            esc(d.caller.as_deref().unwrap_or("")),
            esc(d.step.as_deref().unwrap_or("")),
            d.approved_by.unwrap_or(""),
        );
    }
    main.push_str("</table>");
    main
}

/// Milliseconds since the epoch as `HH:MM:SS.mmm` (UTC).
pub fn time(ms: u64) -> String {
    let seconds = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        (seconds / 3600) % 24,
        (seconds / 60) % 60,
        seconds % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            esc(r#"<script>alert("x") & 'y'</script>"#),
            "&lt;script&gt;alert(&quot;x&quot;) &amp; &#39;y&#39;&lt;/script&gt;"
        );
    }

    #[test]
    fn a_long_value_is_cut_saying_so() {
        let long = Value::String("x".repeat(10_000));
        let shown = json(&long);
        assert!(shown.contains("bytes in all"), "{shown}");
        assert!(shown.len() < 5_000);
        assert_eq!(
            json(&serde_json::json!({"a": 1})),
            "<pre>{\n  &quot;a&quot;: 1\n}</pre>"
        );
    }

    #[test]
    fn the_audit_filters_by_tool_caller_and_run() {
        let decision = |tool: &str, caller: &str, run: &str| Decision {
            time_ms: 3_723_004,
            tool: tool.into(),
            tier: "read",
            path: "plan",
            decision: "allow",
            run: Some(run.into()),
            step: None,
            approved_by: None,
            plan: None,
            caller: Some(caller.into()),
        };
        let all = [
            decision("fs__read", "alice", "r1"),
            decision("git__log", "bob", "r2"),
        ];
        let q = |k: &str, v: &str| HashMap::from([(k.to_owned(), v.to_owned())]);
        let page = audit(&all, &q("tool", "git"));
        assert!(
            page.contains("git__log") && !page.contains("<td>fs__read"),
            "{page}"
        );
        let page = audit(&all, &q("caller", "alice"));
        assert!(
            page.contains("fs__read") && !page.contains("<td>git__log"),
            "{page}"
        );
        let page = audit(&all, &q("run", "r2"));
        assert!(
            page.contains("git__log") && page.contains("01:02:03.004"),
            "{page}"
        );
    }
}
