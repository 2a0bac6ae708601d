//! The one checkpoint every call to a downstream tool passes: the `[policy]` in force
//! (tiers, `deny`, `confirm`, and the run's approval a plan step carries in its route)
//! and the pins of `servers.lock` (a tool whose definition changed since it was pinned
//! is held back), for the caller `[[access]]` grants what (a tool it may not use is an
//! unknown one to it; what it lists is its [`Downstreams::catalog_for`]). Its decision is
//! recorded in the audit trail, and its proof ([`Authorized`], which only
//! `Policy::authorize` makes) is what every way to a tool takes. A reload swaps the
//! policy, the pins and the rules whole, so a decision sees one of each.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};

use crate::catalog::{Catalog, Pins};
use crate::config::{Config, PolicyConfig};
use crate::identity::Identity;
use crate::lock::{Lock, digest};
use crate::policy::{Authorized, Denied, Grant, Policy, Route, Rule, Tier};

/// The policy and the pins in force.
pub(super) struct Checkpoint {
    /// The policy, and the `[policy]` it was made of (to tell whether a reload changed it).
    policy: RwLock<(Arc<Policy>, PolicyConfig)>,
    /// Which definitions `servers.lock` trusts; read again on each reload.
    pins: RwLock<Arc<Pins>>,
    /// `[[access]]`: what each caller may see and call.
    access: RwLock<Arc<Vec<Arc<Rule>>>>,
    /// Where `servers.lock` is (none for the built-in config).
    lock_path: Option<PathBuf>,
}

impl Checkpoint {
    /// The checkpoint of `config`: its `[policy]`, auditing where `[proxy] audit_log`
    /// says, and its lock's pins.
    pub(super) fn new(config: &Config) -> Self {
        let policy = Policy::new(
            config.policy.deny.clone(),
            config.policy.confirm,
            config.proxy.audit_log.clone(),
        );
        Self {
            policy: RwLock::new((Arc::new(policy), config.policy.clone())),
            pins: RwLock::new(Arc::new(load_pins(config))),
            access: RwLock::new(Arc::new(config.access.clone())),
            lock_path: config.lock_path.clone(),
        }
    }

    /// What `who` (`None`: no identity) may see and call, by the `[[access]]` in force.
    pub(super) fn grant(&self, who: Option<&Identity>) -> Grant {
        let rules = self
            .access
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Grant::of(&rules, who)
    }

    /// Puts `config`'s `[[access]]` in force; whether it differs from the rules before.
    pub(super) fn apply_access(&self, config: &Config) -> bool {
        let mut access = self.access.write().unwrap_or_else(PoisonError::into_inner);
        if format!("{:?}", config.access) == format!("{:?}", **access) {
            return false;
        }
        *access = Arc::new(config.access.clone());
        true
    }

    /// The policy in force.
    pub(super) fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .clone()
    }

    /// The pins in force.
    pub(super) fn pins(&self) -> Arc<Pins> {
        self.pins
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The decision on the exported tool `name`, of `tier` (`None`: not listed), for
    /// `route`, as `catalog` holds it back or not (recorded in the audit trail).
    pub(super) fn decide(
        &self,
        catalog: &Catalog,
        name: &str,
        tier: Option<Tier>,
        route: &Route,
        grant: &Grant,
    ) -> Result<Authorized, Denied> {
        let held = catalog.quarantined().iter().find(|q| q.exported == name);
        self.policy()
            .authorize(name, tier, held.map(|q| q.change.as_str()), route, grant)
    }

    /// The decision on a plan's resource step, a read of `uri` (recorded in the audit
    /// trail): `[policy] deny` globs match `resource:<uri>`.
    pub(super) fn decide_read(
        &self,
        uri: &str,
        route: &Route,
        grant: &Grant,
    ) -> Result<(), Denied> {
        let name = format!("resource:{uri}");
        self.policy()
            .authorize(&name, Some(Tier::Read), None, route, grant)
            .map(|_| ())
    }

    /// Puts `config`'s `[policy]` in force, if it differs from the one in force (its
    /// audit trail goes on where it went: `[proxy]` is not reloaded). Whether it did.
    pub(super) fn apply_policy(&self, config: &PolicyConfig) -> bool {
        let mut policy = self.policy.write().unwrap_or_else(PoisonError::into_inner);
        if format!("{config:?}") == format!("{:?}", policy.1) {
            return false;
        }
        let next = policy.0.with_rules(config.deny.clone(), config.confirm);
        *policy = (Arc::new(next), config.clone());
        true
    }

    /// Reads `config`'s lock again and puts its pins in force, unless that turns pinning
    /// off while a lock was in force: a lock that vanished (deleted, or mid-rename by an
    /// editor) leaves the pins in force until a lock is there again.
    pub(super) fn repin(&self, config: &Config) {
        let next = load_pins(config);
        let mut pins = self.pins.write().unwrap_or_else(PoisonError::into_inner);
        if matches!(next, Pins::Unpinned) && !matches!(**pins, Pins::Unpinned) {
            tracing::warn!(
                "servers.lock is gone: the tools it pinned stay pinned until `planmux lock` writes it again (restart planmux to run without a lock)"
            );
        } else {
            *pins = Arc::new(next);
        }
    }
}

impl super::Downstreams {
    /// Accepts the quarantined tool `exported` as its server defines it now (the
    /// console's accept button, `planmux lock` for one tool, by `caller`): its digest is
    /// written to `servers.lock`, the pins are put in force, the hosts told its list
    /// changed, and the audit trail records it.
    /// What was accepted, or why nothing was.
    pub async fn accept(&self, exported: &str, caller: Option<&str>) -> Result<String, String> {
        let catalog = self.catalog();
        let held = catalog
            .quarantined()
            .iter()
            .find(|q| q.exported == exported)
            .ok_or_else(|| format!("'{exported}' is not quarantined"))?;
        let path = (self.checkpoint.lock_path.as_ref())
            .ok_or("the built-in config has no servers.lock")?;
        let tool = (self.offered(&held.server, &held.tool))
            .ok_or_else(|| format!("'{}' no longer offers '{}'", held.server, held.tool))?;
        let mut lock = Lock::load(path)?.ok_or_else(|| format!("{} is gone", path.display()))?;
        let pinned = lock.servers.entry(held.server.clone()).or_default();
        pinned.insert(held.tool.clone(), digest(&tool));
        lock.save(path)
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
        *self
            .checkpoint
            .pins
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(Pins::Locked(lock));
        let changed = self.rebuild_and_notify().await;
        if changed.any() {
            self.host.notify_changed(changed).await;
        }
        let tier = (self.catalog().entries().iter())
            .find(|e| e.exported.as_str() == exported)
            .map_or(Tier::Destructive, |e| e.tier);
        self.policy().accepted(exported, tier, caller);
        Ok(format!(
            "{exported} accepted: its definition is pinned in {}",
            path.display()
        ))
    }

    /// The parts of `server`'s tool `tool` as `servers.lock` pinned them, if it keeps
    /// them.
    pub fn pinned(&self, server: &str, tool: &str) -> Option<serde_json::Value> {
        match &*self
            .checkpoint
            .pins
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            Pins::Locked(lock) => lock.pinned(server, tool),
            _ => None,
        }
    }

    /// The definition `server` offers now for its tool `tool` (its own name for it).
    pub fn offered(&self, server: &str, tool: &str) -> Option<rmcp::model::Tool> {
        let servers = self.servers();
        let found = servers.iter().find(|s| s.config.name == server)?;
        found.tools().into_iter().find(|t| t.name == tool)
    }

    /// What `who` (`None`: no identity: stdio, `planmux run`) may see and call.
    pub fn grant(&self, who: Option<&Identity>) -> Grant {
        self.checkpoint.grant(who)
    }

    /// The catalog as the caller `grant` is of sees it: the whole one when no rule
    /// limits it.
    pub fn catalog_for(&self, grant: &Grant) -> Arc<Catalog> {
        let catalog = self.catalog();
        if grant.is_all() {
            return catalog;
        }
        Arc::new(catalog.visible(|name| grant.allows(name)))
    }

    /// The checkpoint: whether `route` may call the exported tool `name` for the caller
    /// `grant` is of (recorded in
    /// the audit trail). The proof it returns is what [`Self::call_tool`] requires.
    ///
    /// `name` is resolved first as a direct call's is (docs/plan-language.md, "Naming
    /// tools"): the proof is for the exported name it means, which is where the call goes.
    /// A name that resolves to nothing is decided as written (denied by a glob, or found
    /// unknown on the way to the server).
    pub async fn authorize(
        &self,
        name: &str,
        route: &Route,
        grant: &Grant,
    ) -> Result<Authorized, Denied> {
        self.ready_for(name).await;
        let catalog = self.catalog();
        let (name, tier) = match catalog.find_called(name) {
            Some(entry) => (entry.exported.as_str(), Some(entry.tier)),
            None => (name, None),
        };
        self.checkpoint.decide(&catalog, name, tier, route, grant)
    }

    /// [`Self::authorize`] without waiting: `None` when it would wait (`name` not
    /// listed yet, or listed from memory while its server starts).
    pub fn authorize_now(
        &self,
        name: &str,
        route: &Route,
        grant: &Grant,
    ) -> Option<Result<Authorized, Denied>> {
        let catalog = self.catalog();
        let entry = catalog.get(name)?;
        // Listed from memory: the server's own list decides, once it is up.
        if self
            .server(&entry.server)
            .is_none_or(|s| !self.has_listed(&s))
        {
            return None;
        }
        Some(
            self.checkpoint
                .decide(&catalog, name, Some(entry.tier), route, grant),
        )
    }

    /// The checkpoint for a plan's resource step: a read of `uri` (recorded in the audit
    /// trail). `[policy] deny` globs match `resource:<uri>`.
    pub fn authorize_read(&self, uri: &str, route: &Route, grant: &Grant) -> Result<(), Denied> {
        self.checkpoint.decide_read(uri, route, grant)
    }
}

/// `servers.lock`, when the config has one; a lock that cannot be read holds every tool
/// back rather than turning pinning off.
fn load_pins(config: &Config) -> Pins {
    let Some(path) = &config.lock_path else {
        return Pins::Unpinned;
    };
    match Lock::load(path) {
        Ok(Some(lock)) => Pins::Locked(lock),
        Ok(None) => Pins::Unpinned,
        Err(why) => {
            tracing::error!("{why}; every tool is quarantined until `planmux lock` rewrites it");
            Pins::Broken(why)
        }
    }
}
