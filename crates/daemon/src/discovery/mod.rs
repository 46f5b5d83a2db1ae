//! Service discovery (docs/discovery.md): sources that each keep a list of targets up to
//! date — Prometheus-style files ([`file_sd`]), DNS names ([`dns`]) and, with the
//! `kubernetes` feature, pods (`kubernetes`) — and the rule that
//! turns a found target into a scraped one ([`discovered_target`]).
//!
//! A source runs as its own task and publishes its whole current list on a `watch` channel
//! whenever the list changes; the daemon's fleet (crates/daemon/src/daemon/fleet.rs) merges
//! the lists with the static `targets:`, admits at most the limit of them ([`limits`]) and
//! starts, keeps or retires scrape loops.

pub mod dns;
pub mod file_sd;
mod found;
#[cfg(feature = "kubernetes")]
pub mod kubernetes;
pub mod limits;
mod publisher;

use std::sync::Arc;

use tokio::sync::{Notify, watch};

use crate::config::Discovery;

pub use file_sd::TargetFileError;
pub use found::{AddressError, EXPORTED_LABELS, Found, discovered_target, metrics_url};
pub use publisher::Publisher;

/// A running source. Dropping it stops it.
pub struct Source {
    pub config: Discovery,
    found: watch::Receiver<Vec<Found>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Source {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Source {
    /// Starts the source; `changed` is notified each time its list changes, and `stats`
    /// counts its failed reads.
    pub fn start(config: Discovery, changed: Arc<Notify>, stats: Arc<limits::DiscoveryStats>) -> Source {
        let (publish, found) = Publisher::channel(changed, stats);
        let task = match &config {
            Discovery::FileSd(f) => tokio::spawn(file_sd::run(f.clone(), publish)),
            Discovery::Dns(d) => tokio::spawn(dns::run(d.clone(), publish)),
            #[cfg(feature = "kubernetes")]
            Discovery::Kubernetes(k) => tokio::spawn(kubernetes::run(k.clone(), publish)),
            #[cfg(not(feature = "kubernetes"))]
            Discovery::Kubernetes(k) => tokio::spawn(without_kubernetes(k.clone(), publish)),
        };
        Source { config, found, task }
    }

    /// The source's current list.
    pub fn found(&self) -> Vec<Found> {
        self.found.borrow().clone()
    }
}

/// Without the `kubernetes` feature the source only says why it finds nothing. A loaded
/// config never gets here (validation refuses `kubernetes:` in such a build); a [`Config`](crate::config::Config)
/// built in code can.
#[cfg(not(feature = "kubernetes"))]
async fn without_kubernetes(k: crate::config::KubernetesSd, _publish: Publisher) {
    tracing::error!(
        namespace = %k.namespace,
        "kubernetes discovery is not in this build of goodput; it finds no targets (docs/discovery.md#kubernetes)"
    );
}
