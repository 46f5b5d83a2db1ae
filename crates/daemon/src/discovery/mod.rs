//! Service discovery (docs/discovery.md): sources that each keep a list of targets up to
//! date — Prometheus-style files ([`file_sd`]), DNS names ([`dns`]) and, with the
//! `kubernetes` feature, pods (`kubernetes`) — and the rule that
//! turns a found target into a scraped one ([`discovered_target`]).
//!
//! A source runs as its own task and publishes its whole current list on a `watch` channel
//! whenever the list changes; the daemon's fleet (crates/daemon/src/daemon/fleet.rs) merges
//! the lists with the static `targets:` and starts, keeps or retires scrape loops.

pub mod dns;
pub mod file_sd;
#[cfg(feature = "kubernetes")]
pub mod kubernetes;

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{Notify, watch};
use url::Url;

use crate::adapt::EngineHint;
use crate::config::{Config, Discovery, Target};

/// One target a source found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The `target` label goodput exports it under (docs/discovery.md#target-names).
    pub name: String,
    pub url: Url,
    /// `discovery` (the source's kind) and the plain labels the source gave.
    pub labels: BTreeMap<String, String>,
}

/// The labels of a discovered target that are exported on `llm_slo_target_info` (the rest
/// show in /api/v1/report only): few and fixed, so that a file cannot multiply series.
pub const EXPORTED_LABELS: &[&str] = &["discovery", "namespace", "pod", "node"];

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
    /// Starts the source; `changed` is notified each time its list changes.
    pub fn start(config: Discovery, changed: Arc<Notify>) -> Source {
        let (tx, found) = watch::channel(Vec::new());
        let publish = Publisher { tx, changed };
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

/// Without the `kubernetes` feature the source only says why it finds nothing.
#[cfg(not(feature = "kubernetes"))]
async fn without_kubernetes(k: crate::config::KubernetesSd, _publish: Publisher) {
    tracing::error!(
        namespace = %k.namespace,
        "kubernetes discovery is not in this build of goodput; it finds no targets (docs/discovery.md#kubernetes)"
    );
}

/// A source's end of its channel.
pub struct Publisher {
    tx: watch::Sender<Vec<Found>>,
    changed: Arc<Notify>,
}

impl Publisher {
    /// Publishes `found` if it differs from the list published before.
    pub fn publish(&self, found: Vec<Found>) {
        if self.tx.send_if_modified(|cur| {
            let differs = *cur != found;
            if differs {
                *cur = found;
            }
            differs
        }) {
            self.changed.notify_one();
        }
    }
}

/// The scrape settings of a discovered target: the config's `scrape:` defaults, the engine
/// found from its metrics, no tap and no traces; its model defaults to its name, as for a
/// static target.
pub fn discovered_target(config: &Config, f: &Found) -> Target {
    let s = &config.scrape;
    Target {
        name: f.name.clone(),
        url: f.url.clone(),
        engine: EngineHint::Auto,
        model: f.name.clone(),
        bearer_token_file: None,
        headers: Vec::new(),
        interval: s.interval,
        timeout: s.timeout.min(s.interval),
        follow_redirects: s.follow_redirects,
        cardinality: s.cardinality,
        traces: None,
        tap: None,
    }
}

/// The URL of a target at `address` (`host:port`), as Prometheus builds it from
/// `__scheme__`, `__address__` and `__metrics_path__`.
pub fn metrics_url(scheme: &str, address: &str, path: &str) -> Result<Url, String> {
    if !matches!(scheme, "http" | "https") {
        return Err(format!("__scheme__ {scheme:?} is not http or https"));
    }
    if address.is_empty() || address.contains('/') || address.contains('@') {
        return Err(format!("{address:?} is not a host:port address"));
    }
    let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
    let url = Url::parse(&format!("{scheme}://{address}{path}")).map_err(|e| format!("{address:?}: {e}"))?;
    if url.host().is_none() {
        return Err(format!("{address:?} has no host"));
    }
    Ok(url)
}
