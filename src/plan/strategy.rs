//! How a plan runs: its scheduling [`Strategy`] and its failure policy [`OnError`],
//! shared by the parsed plan, the validated plan and the executor.

use std::fmt;

use serde::Serialize;

use super::names::fold_name;

/// How the steps of a plan are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// A dependency graph: each step starts when what it reads has finished.
    #[default]
    Auto,
    /// The same graph as `Auto`; accepted because models and seed dialects say it.
    Parallel,
    /// One step at a time, in listed order.
    Sequential,
    /// Listed order, and each step also receives the previous step's output.
    Chained,
    /// All steps at once; the first success wins and the rest are cancelled.
    Competitive,
}

impl Strategy {
    /// Every strategy with its canonical name, for parsing and for messages.
    pub const ALL: [(Strategy, &'static str); 5] = [
        (Strategy::Auto, "auto"),
        (Strategy::Parallel, "parallel"),
        (Strategy::Sequential, "sequential"),
        (Strategy::Chained, "chained"),
        (Strategy::Competitive, "competitive"),
    ];

    /// The canonical (snake_case) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Auto => "auto",
            Strategy::Parallel => "parallel",
            Strategy::Sequential => "sequential",
            Strategy::Chained => "chained",
            Strategy::Competitive => "competitive",
        }
    }

    /// Parses a strategy in any case (`AUTO`, `Parallel`, `planType: "CHAINED"`). Seed
    /// 002's `CONDITIONAL` and `ITERATIVE` are `auto`: their branches and loops are the
    /// steps' `when` and `foreach`.
    pub fn parse(text: &str) -> Option<Self> {
        let key = fold_name(text);
        if key == "conditional" || key == "iterative" {
            return Some(Strategy::Auto);
        }
        Self::ALL
            .iter()
            .find(|(_, name)| fold_name(name) == key)
            .map(|(strategy, _)| *strategy)
    }

    /// Whether steps run strictly in listed order, so a reference may only look back.
    pub fn is_ordered(self) -> bool {
        matches!(self, Strategy::Sequential | Strategy::Chained)
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a step failure does to the rest of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// Dependents of a failed step are skipped; independent steps run on.
    #[default]
    FailForward,
    /// The first failure cancels everything still running.
    FailFast,
    /// A failed step's error text becomes its output and dependents run.
    Continue,
}

impl OnError {
    /// Every policy with its canonical name.
    pub const ALL: [(OnError, &'static str); 3] = [
        (OnError::FailForward, "fail_forward"),
        (OnError::FailFast, "fail_fast"),
        (OnError::Continue, "continue"),
    ];

    /// The canonical (snake_case) name.
    pub fn as_str(self) -> &'static str {
        match self {
            OnError::FailForward => "fail_forward",
            OnError::FailFast => "fail_fast",
            OnError::Continue => "continue",
        }
    }

    /// Parses a policy in any case and with `_`, `-` or nothing between words.
    pub fn parse(text: &str) -> Option<Self> {
        let key = fold_name(text);
        Self::ALL
            .iter()
            .find(|(_, name)| fold_name(name) == key)
            .map(|(policy, _)| *policy)
    }
}

impl fmt::Display for OnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
