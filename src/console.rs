//! The console (`/console` on the HTTP front, `planmux console`): pages that show what
//! planmux knows (the servers and their tools, quarantined tools, the recent runs as
//! graphs and timelines, plans waiting for approval, the audit trail) and the few things
//! a user does there: sign in to a server, accept a quarantined tool, approve or decline
//! a plan.
//!
//! Server-rendered HTML and one small script built into the binary (no toolchain, no
//! CDN: the machine may be offline). The script keeps a page live: it asks for the
//! page's main part again every [`LIVE_MS`] ms (`X-Planmux-Live`), and the console
//! answers with that part only. Who may open it, sign-in and CSRF are the front's
//! (`http/console.rs`); what a page shows and does is here, on the same checkpoint,
//! approvals and records as everything else.

mod approvals;
mod html;
mod runs;
mod servers;

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::downstream::Downstreams;
use crate::identity::Identity;
use crate::runner::PlanRunner;

/// How often a page asks for its main part again.
pub const LIVE_MS: u32 = 1_500;

/// What the console knows and acts on: the servers and the plan runner, and the stop
/// of the process (plans approved here end with it).
pub struct Console {
    downstreams: Arc<Downstreams>,
    runner: Arc<PlanRunner>,
    stop: CancellationToken,
}

/// A request the front let through.
pub struct Asked<'a> {
    /// A form's post (else a GET).
    pub post: bool,
    /// The path below `/console` (`""`, `/runs`, `/runs/ID`, …).
    pub path: &'a str,
    pub query: &'a str,
    /// A post's form fields.
    pub form: &'a HashMap<String, String>,
    /// Asked by the live script: the page's main part only.
    pub live: bool,
    /// The CSRF token its forms carry.
    pub csrf: &'a str,
    pub who: &'a Identity,
}

/// The console's answer.
pub enum Page {
    Html(String),
    /// The live script.
    Script(&'static str),
    /// Go there (after a form's post).
    SeeOther(String),
    NotFound(String),
    /// The action cannot be done (a tool no longer quarantined, a plan already decided).
    Refused(String),
}

impl Console {
    pub fn new(
        downstreams: Arc<Downstreams>,
        runner: Arc<PlanRunner>,
        stop: CancellationToken,
    ) -> Self {
        Self {
            downstreams,
            runner,
            stop,
        }
    }

    /// The sign-in page, saying why the last try failed.
    pub fn sign_in_page(&self, why: Option<&str>) -> String {
        html::sign_in(why)
    }

    /// Answers `asked`.
    pub async fn answer(&self, asked: Asked<'_>) -> Page {
        let query = query(asked.query);
        let (title, main) = match (asked.post, asked.path) {
            (false, "/live.js") => return Page::Script(html::LIVE_SCRIPT),
            (false, "" | "/") => ("Servers", servers::page(&self.downstreams, asked.csrf)),
            (false, "/runs") => (
                "Runs",
                runs::list(
                    &self.runner.live.now(),
                    &self.runner.runs.recent(),
                    &self.runner.live.planned(),
                ),
            ),
            (false, path) if let Some(key) = path.strip_prefix("/planned/") => {
                let planned = self.runner.live.planned();
                let Some(plan) = planned.iter().find(|p| p.key.to_string() == key) else {
                    return Page::NotFound(format!("no lazy plan #{key} is kept"));
                };
                ("Run", runs::planned(plan))
            }
            (false, path) if let Some(id) = path.strip_prefix("/runs/") => {
                let records = self.runner.runs.recent();
                let Some(record) = records.iter().find(|r| r.run_id == id) else {
                    return Page::NotFound(format!("no run '{id}' is kept in this process"));
                };
                ("Run", runs::one(record))
            }
            (false, "/approvals") => (
                "Approvals",
                approvals::page(self.runner.tokens.waiting().await, asked.csrf),
            ),
            (false, "/audit") => (
                "Audit",
                html::audit(&self.downstreams.policy().decisions(), &query),
            ),
            (true, "/servers/accept") => {
                let tool = asked.form.get("tool").map_or("", String::as_str);
                let caller = Some(asked.who.sub.as_str()).filter(|sub| !sub.is_empty());
                return match self.downstreams.accept(tool, caller).await {
                    Ok(_) => Page::SeeOther("/console".into()),
                    Err(why) => Page::Refused(why),
                };
            }
            (true, "/servers/sign-in") => {
                let server = asked.form.get("server").map_or("", String::as_str);
                return servers::sign_in(&self.downstreams, server).await;
            }
            (true, "/approvals/approve") => {
                let token = asked.form.get("token").map_or("", String::as_str);
                let grant = self.downstreams.grant(Some(asked.who));
                return approvals::approve(&self.runner, token, asked.who, &grant, &self.stop)
                    .await;
            }
            (true, "/approvals/decline") => {
                let token = asked.form.get("token").map_or("", String::as_str);
                return approvals::decline(&self.runner, token, asked.who).await;
            }
            (_, path) => {
                return Page::NotFound(format!("the console has no page '/console{path}'"));
            }
        };
        if asked.live {
            return Page::Html(main);
        }
        Page::Html(html::layout(title, &main))
    }
}

/// A query string's fields.
fn query(text: &str) -> HashMap<String, String> {
    url::form_urlencoded::parse(text.as_bytes())
        .into_owned()
        .collect()
}
