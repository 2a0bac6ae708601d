//! `[[access]]`: what each caller may see and call. The first rule whose `who` matches the
//! caller ([`Identity`]) applies: its `tools` globs (exported names, planmux's own tools
//! among them) and its own `confirm`. A caller no rule matches gets nothing (fail
//! closed); without any rule everyone gets everything. The caller's [`Grant`] is what
//! the checkpoint and every list the caller reads go by.

use std::sync::Arc;

use globset::GlobSet;

use super::Confirm;
use crate::identity::Identity;

/// Who a rule is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    Sub(String),
    Group(String),
    Email(String),
    /// `"*"`: every caller, the one with no identity too (stdio, no token asked).
    Anyone,
}

impl Who {
    /// `sub:ID`, `group:NAME`, `email:ADDR` or `*`, or why not.
    pub fn parse(text: &str) -> Result<Self, String> {
        let wrong = || {
            format!(
                "'{}' names no caller: write sub:ID, group:NAME, email:ADDR or \"*\"",
                crate::text::clip(text, 40)
            )
        };
        if text == "*" {
            return Ok(Self::Anyone);
        }
        let (kind, value) = text.split_once(':').ok_or_else(wrong)?;
        if value.is_empty() {
            return Err(wrong());
        }
        let value = value.to_owned();
        match kind {
            "sub" => Ok(Self::Sub(value)),
            "group" => Ok(Self::Group(value)),
            "email" => Ok(Self::Email(value)),
            _ => Err(wrong()),
        }
    }

    fn matches(&self, who: &Identity) -> bool {
        match self {
            Self::Anyone => true,
            Self::Sub(sub) => !who.sub.is_empty() && *sub == who.sub,
            Self::Group(group) => who.groups.contains(group),
            Self::Email(email) => who
                .email
                .as_ref()
                .is_some_and(|e| e.eq_ignore_ascii_case(email)),
        }
    }
}

/// One `[[access]]` rule.
#[derive(Debug)]
pub struct Rule {
    pub who: Vec<Who>,
    /// The tools it allows (exported-name globs), and the globs as written.
    pub tools: GlobSet,
    pub patterns: Vec<String>,
    /// Its callers' `[policy] confirm`, when it sets one.
    pub confirm: Option<Confirm>,
}

/// What one caller may see and call.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The caller, as the audit log names it (`sub`; empty for no identity).
    caller: String,
    allowed: Allowed,
}

#[derive(Debug, Clone)]
enum Allowed {
    /// No `[[access]]` rules: everything.
    All,
    Rule(Arc<Rule>),
    /// No rule matches the caller.
    Nothing,
}

impl Grant {
    /// Everything, for a caller with no identity (stdio, `planmux run`), when no rule is
    /// configured.
    pub fn all() -> Self {
        Self {
            caller: String::new(),
            allowed: Allowed::All,
        }
    }

    /// The grant of `who` (`None`: no identity) under `rules`.
    pub fn of(rules: &[Arc<Rule>], who: Option<&Identity>) -> Self {
        let anyone = Identity::anyone();
        let who = who.unwrap_or(&anyone);
        let allowed = if rules.is_empty() {
            Allowed::All
        } else {
            rules
                .iter()
                .find(|rule| rule.who.iter().any(|w| w.matches(who)))
                .map_or(Allowed::Nothing, |rule| Allowed::Rule(rule.clone()))
        };
        Self {
            caller: who.sub.clone(),
            allowed,
        }
    }

    /// Whether it allows every tool (no rule applies a limit).
    pub fn is_all(&self) -> bool {
        matches!(self.allowed, Allowed::All)
    }

    /// Whether the caller may see and call the exported tool `name`.
    pub fn allows(&self, name: &str) -> bool {
        match &self.allowed {
            Allowed::All => true,
            Allowed::Rule(rule) => rule.tools.is_match(name),
            Allowed::Nothing => false,
        }
    }

    /// The caller's own `confirm`, when its rule sets one.
    pub fn confirm(&self) -> Option<Confirm> {
        match &self.allowed {
            Allowed::Rule(rule) => rule.confirm,
            _ => None,
        }
    }

    /// The caller, as the audit log names it.
    pub fn caller(&self) -> &str {
        &self.caller
    }
}

#[cfg(test)]
mod tests {
    use globset::{Glob, GlobSetBuilder};

    use super::*;

    fn rule(who: &[&str], tools: &[&str], confirm: Option<Confirm>) -> Arc<Rule> {
        let mut set = GlobSetBuilder::new();
        for tool in tools {
            set.add(Glob::new(tool).expect("a glob"));
        }
        Arc::new(Rule {
            who: who.iter().map(|w| Who::parse(w).expect("a who")).collect(),
            tools: set.build().expect("globs"),
            patterns: tools.iter().map(|t| (*t).to_owned()).collect(),
            confirm,
        })
    }

    fn identity(sub: &str, email: Option<&str>, groups: &[&str]) -> Identity {
        Identity {
            sub: sub.into(),
            issuer: Some("https://idp".into()),
            email: email.map(str::to_owned),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }

    #[test]
    fn the_first_matching_rule_applies_and_no_match_is_nothing() {
        let rules = [
            rule(&["group:platform"], &["*"], Some(Confirm::Destructive)),
            rule(
                &["email:Bob@X.org", "sub:carol"],
                &["git__*", "execute_plan"],
                None,
            ),
            rule(&["*"], &["search_tools"], None),
        ];
        let alice = Grant::of(&rules, Some(&identity("alice", None, &["platform"])));
        assert!(alice.allows("fs__write") && alice.confirm() == Some(Confirm::Destructive));
        let bob = Grant::of(&rules, Some(&identity("bob", Some("bob@x.org"), &[])));
        assert!(bob.allows("git__log") && bob.allows("execute_plan"));
        assert!(!bob.allows("fs__write") && !bob.allows("search_tools"));
        assert_eq!(bob.caller(), "bob");
        let carol = Grant::of(&rules, Some(&identity("carol", None, &[])));
        assert!(carol.allows("git__log"));
        let anyone = Grant::of(&rules, None);
        assert!(anyone.allows("search_tools") && !anyone.allows("git__log"));
        let strict = [rule(&["group:platform"], &["*"], None)];
        assert!(!Grant::of(&strict, Some(&identity("dave", None, &[]))).allows("x"));
        assert!(Grant::of(&[], None).is_all());
    }

    #[test]
    fn who_is_read_as_written_and_a_wrong_one_named() {
        assert_eq!(Who::parse("group:ops"), Ok(Who::Group("ops".into())));
        assert_eq!(Who::parse("*"), Ok(Who::Anyone));
        for wrong in ["team:x", "sub:", "alice"] {
            let why = Who::parse(wrong).expect_err(wrong);
            assert!(why.contains(wrong) && why.contains("group:NAME"), "{why}");
        }
    }
}
