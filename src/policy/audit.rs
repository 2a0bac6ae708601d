//! The audit trail: every decision the checkpoint makes, and every answer a user gives to
//! an approval, as a `tracing` event and, when `[proxy] audit_log` is set, as a JSON line
//! appended to that file. The last [`KEPT_DECISIONS`] are also kept in memory, for the
//! console's audit page.

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

use super::tier::Tier;

/// How many of the last decisions are kept in memory.
pub const KEPT_DECISIONS: usize = 1_000;

/// Where decisions are recorded besides the log.
#[derive(Debug, Default)]
pub(super) struct AuditTrail {
    /// Where decisions are also appended as JSON lines (`[proxy] audit_log`), and the
    /// file once opened.
    log: Option<(PathBuf, Mutex<Option<std::fs::File>>)>,
    /// The last decisions, oldest first (shared by the trails a policy change makes).
    recent: Arc<Mutex<VecDeque<Decision>>>,
}

/// One decision as kept in memory: an audit log line's fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub time_ms: u64,
    pub tool: String,
    pub tier: &'static str,
    /// `direct`, `plan`, `approval` or `lock` (a quarantined tool accepted).
    pub path: &'static str,
    /// `allow`, `deny`, `approved`, `declined` or `accepted`.
    pub decision: &'static str,
    pub run: Option<String>,
    pub step: Option<String>,
    pub approved_by: Option<&'static str>,
    pub plan: Option<String>,
    pub caller: Option<String>,
}

/// One line of the audit trail.
pub(super) struct Audited<'a> {
    pub(super) tool: &'a str,
    pub(super) tier: Option<Tier>,
    /// `direct`, `plan`, `approval` or `lock` (a quarantined tool accepted).
    pub(super) path: &'static str,
    /// `allow`, `deny`, `approved`, `declined` or `accepted`.
    pub(super) decision: &'static str,
    pub(super) run: Option<&'a str>,
    pub(super) step: Option<&'a str>,
    pub(super) approved_by: Option<&'static str>,
    /// The digest of the plan an approval is for.
    pub(super) plan: Option<&'a str>,
    /// Who asked (a verified caller's `sub`, or which static token); `None`: no identity.
    pub(super) caller: Option<&'a str>,
}

impl AuditTrail {
    /// A trail appending to `audit_log` when given (the file is opened at the first
    /// decision; a failure to write is logged).
    pub(super) fn new(audit_log: Option<PathBuf>) -> Self {
        Self {
            log: audit_log.map(|path| (path, Mutex::new(None))),
            recent: Arc::default(),
        }
    }

    /// A trail appending to the same file and keeping to the same memory.
    pub(super) fn same(&self) -> Self {
        Self {
            log: self.path().map(|path| (path.to_owned(), Mutex::new(None))),
            recent: self.recent.clone(),
        }
    }

    /// The last decisions, newest first.
    pub(super) fn recent(&self) -> Vec<Decision> {
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        recent.iter().rev().cloned().collect()
    }

    /// The file decisions are appended to, if any.
    pub(super) fn path(&self) -> Option<&Path> {
        self.log.as_ref().map(|(path, _)| path.as_path())
    }

    /// One decision: a `tracing` event, and a JSON line when an audit log is set. A call
    /// let through is a `debug` event, anything else `info`: a line on stderr per call
    /// cost each proxied call about 35 µs (BENCHMARKS.md §1), and the audit log has every
    /// decision.
    pub(super) fn record(&self, entry: Audited<'_>) {
        let Audited {
            tool,
            tier,
            path,
            decision,
            run,
            step,
            approved_by,
            plan,
            caller,
        } = entry;
        let tier = tier.map_or("unknown", Tier::as_str);
        if decision == "allow" {
            tracing::debug!(target: "planmux::audit", tool, tier, path, decision, run, step, approved_by, plan, caller, "authorization");
        } else {
            tracing::info!(target: "planmux::audit", tool, tier, path, decision, run, step, approved_by, plan, caller, "authorization");
        }
        let decided = Decision {
            time_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or_default(),
            tool: tool.to_owned(),
            tier,
            path,
            decision,
            run: run.map(str::to_owned),
            step: step.map(str::to_owned),
            approved_by,
            plan: plan.map(str::to_owned),
            caller: caller.map(str::to_owned),
        };
        let line = self.log.as_ref().map(|_| serde_json::json!(decided));
        {
            let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
            if recent.len() >= KEPT_DECISIONS {
                recent.pop_front();
            }
            recent.push_back(decided);
        }
        let (Some((log, file)), Some(line)) = (&self.log, line) else {
            return;
        };
        let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
        let written = match &mut *file {
            Some(file) => writeln!(file, "{line}"),
            None => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .and_then(|mut opened| {
                    writeln!(opened, "{line}")?;
                    *file = Some(opened);
                    Ok(())
                }),
        };
        if let Err(error) = written {
            tracing::warn!(%error, path = %log.display(), "cannot append to the audit log");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// Each decision is one JSON line appended to the log, with every field and the time.
    #[test]
    fn each_decision_is_one_json_line_in_the_audit_log() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let log = dir.path().join("audit.jsonl");
        let trail = AuditTrail::new(Some(log.clone()));
        assert_eq!(trail.path(), Some(log.as_path()));
        let entry = |decision| Audited {
            tool: "fs__write",
            tier: Some(Tier::Write),
            path: "plan",
            decision,
            run: Some("r1"),
            step: Some("w"),
            approved_by: Some("token"),
            plan: Some("d1"),
            caller: None,
        };
        trail.record(entry("allow"));
        trail.record(entry("deny"));
        let written = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<Value> = written
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let fields = |line: &Value| {
            [
                "tool",
                "tier",
                "path",
                "decision",
                "run",
                "step",
                "approved_by",
                "plan",
            ]
            .map(|field| line[field].as_str().unwrap_or_default().to_owned())
        };
        let expect = |decision: &str| {
            [
                "fs__write",
                "write",
                "plan",
                decision,
                "r1",
                "w",
                "token",
                "d1",
            ]
            .map(str::to_owned)
        };
        assert_eq!(
            lines.iter().map(fields).collect::<Vec<_>>(),
            [expect("allow"), expect("deny")],
            "{written}"
        );
        assert!(
            lines
                .iter()
                .all(|l| l["time_ms"].as_u64().is_some_and(|t| t > 0))
        );
        assert_eq!(AuditTrail::new(None).path(), None);
    }
}
