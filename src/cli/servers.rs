//! The downstream servers of a command that is not `serve`: started for it, and stopped
//! when it is done, however it is done, so that no command stops them by hand.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt as _;

use crate::config::Config;
use crate::downstream::Downstreams;

/// Which servers a command starts before its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Every enabled server (`check`, `tools`, `lock`).
    All,
    /// None: the work starts those it needs (`run` and `validate` start the servers
    /// the plan names, [`crate::runner::PlanRunner::check`]).
    AsNeeded,
}

/// Starts the enabled servers of `config` (`start` says which), runs `work` with them,
/// then shuts them all down
/// (their processes gone) before returning what `work` returned. They are shut down on
/// every way out of `work`: its value, an error or an early return inside it (both are
/// its value too), and a panic, which goes on once they are down.
pub async fn with_servers<T, Work, Fut>(config: &Config, start: Start, work: Work) -> T
where
    Work: FnOnce(Arc<Downstreams>) -> Fut,
    Fut: Future<Output = T>,
{
    let downstreams = match start {
        Start::All => Downstreams::start(config, Arc::default()).await,
        Start::AsNeeded => Downstreams::new(config, Arc::default()),
    };
    let ended = AssertUnwindSafe(async { work(downstreams.clone()).await })
        .catch_unwind()
        .await;
    downstreams.shutdown().await;
    match ended {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn config() -> Config {
        let text = "[servers.metrics]\nbuiltin = \"metrics\"\n";
        Config::parse(text, "test", std::path::Path::new("."), &|_| None).expect("a config")
    }

    /// Each server's error: `closed` once shut down.
    fn errors(downstreams: &Downstreams) -> Vec<Option<String>> {
        downstreams
            .statuses()
            .into_iter()
            .map(|s| s.error)
            .collect()
    }

    #[tokio::test]
    async fn an_early_return_still_shuts_the_servers_down() {
        let config = config();
        let (ended, kept) = with_servers(&config, Start::All, |downstreams| async move {
            assert_eq!(errors(&downstreams), [None], "started");
            let early = async { anyhow::bail!("gave up") };
            let ended: anyhow::Result<()> = early.await;
            (ended, downstreams)
        })
        .await;
        assert!(ended.is_err());
        assert_eq!(errors(&kept), [Some("closed".to_owned())]);
    }

    #[tokio::test]
    async fn a_panic_goes_on_once_the_servers_are_down() {
        let config = config();
        let kept = Mutex::new(None);
        let ended = AssertUnwindSafe(with_servers(&config, Start::All, |downstreams| async {
            *kept.lock().expect("not poisoned") = Some(downstreams);
            panic!("a bug");
        }))
        .catch_unwind()
        .await;
        assert!(ended.is_err(), "the panic goes on");
        let kept = kept.lock().expect("not poisoned").take().expect("kept");
        assert_eq!(errors(&kept), [Some("closed".to_owned())]);
    }
}
