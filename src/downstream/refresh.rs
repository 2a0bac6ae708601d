//! Keeping the catalog current: a server's list changes (each changed server re-listed once
//! at a time, servers concurrently), the catalog rebuilt whole and swapped, the host told
//! what changed; and a reload of servers.toml (new servers start, removed ones stop,
//! changed ones restart, the policy and pins swapped).

use std::sync::{Arc, PoisonError};

use tokio_util::sync::CancellationToken;

use super::changes::Changes;
use super::{Changed, Downstreams, Offer, Server};
use crate::catalog::{Catalog, Resources, ServerResources, ServerTools};
use crate::config::Config;

/// What a reload changed, by server name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reloaded {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub restarted: Vec<String>,
    /// Whether `[policy]` or `[[access]]` changed (they are in force now).
    pub policy: bool,
}

impl Reloaded {
    /// Whether any server, or the policy, changed.
    pub fn any(&self) -> bool {
        self.policy
            || !(self.added.is_empty() && self.removed.is_empty() && self.restarted.is_empty())
    }
}

impl Downstreams {
    /// Re-lists what one server offers (after a `list_changed` or a reconnect) and tells
    /// the host which of its lists changed, or the server `said` changed: a server's
    /// `list_changed` reaches the host even when the merged list reads the same.
    async fn refresh(&self, server_name: &str, said: Changed) {
        let Some(server) = self.server(server_name) else {
            return;
        };
        if let Err(e) = server.relist().await {
            // Shut down meanwhile: nothing to refresh, and nothing wrong.
            if !server.is_closed() {
                tracing::warn!(server = %server_name, error = %e, "could not refresh tools");
            }
            return;
        }
        let changed = self.rebuild_and_notify().await.or(said);
        if changed.any() {
            tracing::info!(server = %server_name, tools = changed.tools, prompts = changed.prompts, resources = changed.resources, "lists changed");
            self.host.notify_changed(changed).await;
        }
    }

    /// Rebuilds the catalog from what every server offers: what changed, and a notice per
    /// tool newly quarantined.
    pub(super) fn rebuild_catalog(&self) -> (Changed, Vec<String>) {
        let servers = self.servers();
        let offers: Vec<(&Arc<Server>, Offer)> = servers.iter().map(|s| (s, s.offer())).collect();
        let lists: Vec<ServerTools> = offers
            .iter()
            .map(|(s, offer)| ServerTools {
                server: s.config.name.clone(),
                namespace: s.config.namespace,
                tools: offer.tools.clone(),
                tiers: s.config.tiers.clone(),
            })
            .collect();
        let listed: Vec<ServerResources> = offers
            .into_iter()
            .map(|(s, offer)| ServerResources {
                server: s.config.name.clone(),
                namespace: s.config.namespace,
                prompts: offer.prompts,
                resources: offer.resources,
                templates: offer.templates,
                subscribe: offer.subscribe,
            })
            .collect();
        let next = Catalog::build(
            &self.separator,
            &lists,
            &self.policy(),
            &self.checkpoint.pins(),
        )
        .with_resources(Resources::build(&self.separator, &listed));
        let mut current = self.catalog.write().unwrap_or_else(PoisonError::into_inner);
        let (was, now) = (current.resources(), next.resources());
        let changed = Changed {
            tools: current.definitions().ne(next.definitions()),
            prompts: was.prompts().ne(now.prompts()),
            resources: was.resources().ne(now.resources()) || was.templates().ne(now.templates()),
        };
        let newly: Vec<String> = next
            .quarantined()
            .iter()
            .filter(|q| !current.quarantined().contains(q))
            .map(|q| {
                format!(
                    "planmux quarantined {}: {}; run `planmux lock` to accept it",
                    q.exported, q.change
                )
            })
            .collect();
        *current = Arc::new(next);
        (changed, newly)
    }

    /// Rebuilds the catalog and tells the host about newly quarantined tools; what
    /// changed.
    pub(super) async fn rebuild_and_notify(&self) -> Changed {
        let (changed, newly) = self.rebuild_catalog();
        for notice in newly {
            tracing::warn!("{notice}");
            self.host.notify_warning(notice).await;
        }
        changed
    }

    /// Applies a changed config's `[policy]` and servers: new ones start, removed ones
    /// stop, changed ones restart, the others keep running untouched; the host hears
    /// what changed. The rest of the config (`[proxy]`, `[http]`, pipelines) is not
    /// reloaded.
    pub async fn reload(&self, config: &Config) -> Reloaded {
        // A tool reviewed with `planmux lock` since is let out of quarantine now. A lock
        // that vanished (deleted, or mid-rename by an editor) does not turn pinning off:
        // the pins in force stay until a lock is there again.
        self.checkpoint.repin(config);
        // New `[[access]]` rules change what each caller lists, all of it.
        let access = self.checkpoint.apply_access(config);
        let old = self.servers();
        let mut next = Vec::new();
        let mut fresh = Vec::new();
        let mut done = Reloaded {
            policy: self.checkpoint.apply_policy(&config.policy) || access,
            ..Reloaded::default()
        };
        for wanted in config.enabled_servers() {
            let existing = old.iter().find(|s| s.config.name == wanted.name);
            // The whole section as parsed (secrets included), compared in memory only.
            match existing {
                Some(server) if format!("{:?}", server.config) == format!("{wanted:?}") => {
                    next.push(server.clone());
                }
                _ => {
                    let server = Arc::new(Server::new(
                        wanted.clone(),
                        super::remembered::Remembered::place(&self.source, wanted),
                        self.host.clone(),
                        self.changes.clone(),
                        self.tracker.clone(),
                    ));
                    match existing {
                        Some(_) => done.restarted.push(wanted.name.clone()),
                        None => done.added.push(wanted.name.clone()),
                    }
                    fresh.push(server.clone());
                    next.push(server);
                }
            }
        }
        let gone: Vec<Arc<Server>> = old
            .iter()
            .filter(|s| !next.iter().any(|n| Arc::ptr_eq(n, s)))
            .cloned()
            .collect();
        done.removed = gone
            .iter()
            .map(|s| s.config.name.clone())
            .filter(|name| !done.restarted.contains(name))
            .collect();
        *self.servers.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        futures::future::join_all(gone.iter().map(|s| s.close())).await;
        // Removed (or now denied) tools leave the lists now; each new server's arrive as
        // it comes up. A new policy may also change planmux's own tools (`approve_plan`
        // goes with `confirm = "none"`) and which pipelines are listed.
        let mut changed = self.rebuild_and_notify().await;
        if done.policy {
            changed = changed.or(Changed::TOOLS);
        }
        if access {
            let all = Changed {
                tools: true,
                prompts: true,
                resources: true,
            };
            changed = changed.or(all);
        }
        if changed.any() {
            self.host.notify_changed(changed).await;
        }
        futures::future::join_all(fresh.iter().map(|s| async move {
            let _ = s.live().await;
            let changed = self.rebuild_and_notify().await;
            if changed.any() {
                self.host.notify_changed(changed).await;
            }
        }))
        .await;
        done
    }
}

/// Refreshes servers as they report changes: each changed server once at a time, servers
/// concurrently, until shutdown.
pub(super) async fn refresh_changed(
    downstreams: std::sync::Weak<Downstreams>,
    changes: Arc<Changes>,
    shutdown: CancellationToken,
) {
    let mut running = futures::stream::FuturesUnordered::new();
    let mut busy = std::collections::HashSet::new();
    loop {
        tokio::select! {
            () = changes.changed() => {}
            Some(done) = futures::StreamExt::next(&mut running) => {
                busy.remove(&done);
            }
            () = shutdown.cancelled() => return,
        }
        for (server, said) in changes.take(&busy) {
            let Some(this) = downstreams.upgrade() else {
                return;
            };
            busy.insert(server.clone());
            running.push(async move {
                this.refresh(&server, said).await;
                server
            });
        }
    }
}
