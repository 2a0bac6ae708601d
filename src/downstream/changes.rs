//! What changed in the servers' lists: [`Changed`] (which of the host's lists), and
//! [`Changes`], the servers whose lists must be read again, each refreshed once at a time.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Mutex, PoisonError};

use tokio::sync::Notify;

/// Which of the host's lists changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changed {
    pub tools: bool,
    pub prompts: bool,
    /// Resources or resource templates.
    pub resources: bool,
}

impl Changed {
    /// Whether anything changed.
    pub fn any(self) -> bool {
        self.tools || self.prompts || self.resources
    }

    /// What either says changed.
    pub fn or(self, other: Changed) -> Changed {
        Changed {
            tools: self.tools || other.tools,
            prompts: self.prompts || other.prompts,
            resources: self.resources || other.resources,
        }
    }

    /// The tool list.
    pub const TOOLS: Changed = Changed {
        tools: true,
        prompts: false,
        resources: false,
    };
}

/// Servers whose lists must be read again (they said a list changed, or reconnected),
/// with the lists they said changed. Each is refreshed once however often it changed
/// meanwhile, so a server that floods `list_changed` costs one refresh at a time, and
/// one slow server does not hold up the others' refreshes.
#[derive(Default)]
pub(crate) struct Changes {
    dirty: Mutex<BTreeMap<String, Changed>>,
    wake: Notify,
}

impl Changes {
    /// Marks `server` as changed: it said the lists in `said` changed.
    pub(crate) fn mark(&self, server: &str, said: Changed) {
        let mut dirty = self.dirty.lock().unwrap_or_else(PoisonError::into_inner);
        let marked = dirty.entry(server.to_owned()).or_default();
        *marked = marked.or(said);
        drop(dirty);
        self.wake.notify_one();
    }

    /// Waits until something is marked (at once if something was marked meanwhile).
    pub(crate) async fn changed(&self) {
        self.wake.notified().await;
    }

    /// Takes the marked servers, with what each said, except those in `busy` (they stay
    /// marked).
    pub(crate) fn take(&self, busy: &HashSet<String>) -> Vec<(String, Changed)> {
        let mut dirty = self.dirty.lock().unwrap_or_else(PoisonError::into_inner);
        let ready: Vec<String> = dirty
            .keys()
            .filter(|s| !busy.contains(*s))
            .cloned()
            .collect();
        ready
            .into_iter()
            .filter_map(|server| dirty.remove_entry(&server))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_changes_add_up_until_it_is_refreshed() {
        let changes = Changes::default();
        let prompts = Changed {
            prompts: true,
            ..Changed::default()
        };
        changes.mark("a", Changed::TOOLS);
        changes.mark("a", prompts);
        changes.mark("b", prompts);
        let busy = HashSet::from(["b".to_owned()]);
        assert_eq!(
            changes.take(&busy),
            vec![("a".to_owned(), Changed::TOOLS.or(prompts))]
        );
        assert_eq!(
            changes.take(&HashSet::new()),
            vec![("b".to_owned(), prompts)]
        );
        assert!(changes.take(&HashSet::new()).is_empty());
    }
}
