//! `kubernetes`: the pods of one namespace matching a label selector, watched through the
//! API server (docs/discovery.md#kubernetes).
//!
//! kube's watcher lists the pods, then watches from the list's resourceVersion (with
//! bookmarks); when the server answers `410 Gone` (the version is too old) it lists again,
//! and after an error it retries with backoff. A pod is a target while it has an IP, is
//! not terminating and has not finished, at `http://POD_IP:PORT/metrics`: `PORT` is the
//! container port named by `kubernetes.port` (or that number), `prometheus.io/port` and
//! `prometheus.io/path` annotations overriding port and path. Its labels are `pod`,
//! `namespace` and `node`.
//!
//! The client is configured as kubectl is: in a pod from its ServiceAccount, elsewhere from
//! `KUBECONFIG` or `~/.kube/config`. It needs `list` and `watch` on pods, nothing else.

use std::collections::BTreeMap;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};

use super::found::{Found, metrics_url};
use super::publisher::Publisher;
use crate::config::KubernetesSd;

/// Keeps the matching pods published until the source is dropped.
pub async fn run(cfg: KubernetesSd, publish: Publisher) {
    let client = match Client::try_default().await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(
                namespace = %cfg.namespace,
                "kubernetes discovery cannot reach the API server: {e}; it finds no targets (run in a pod with a ServiceAccount, or set KUBECONFIG)"
            );
            return;
        }
    };
    let api: Api<Pod> = Api::namespaced(client, &cfg.namespace);
    let mut wc = watcher::Config::default();
    if !cfg.selector.is_empty() {
        wc = wc.labels(&cfg.selector);
    }
    let mut events = watcher::watcher(api, wc).default_backoff().boxed();
    // By pod name: the targets now, and those of a list in progress.
    let mut pods: BTreeMap<String, Found> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, Found>> = None;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => listing = Some(BTreeMap::new()),
            Ok(Event::InitApply(pod)) => {
                if let (Some(l), Some((name, found))) = (listing.as_mut(), target(&cfg, &pod)) {
                    l.insert(name, found);
                }
            }
            // A whole list replaces what was known: pods deleted while the watch was
            // broken are gone from it.
            Ok(Event::InitDone) => pods = listing.take().unwrap_or_default(),
            Ok(Event::Apply(pod)) => {
                let name = pod.metadata.name.clone().unwrap_or_default();
                match target(&cfg, &pod) {
                    Some((_, found)) => pods.insert(name, found),
                    None => pods.remove(&name),
                };
            }
            Ok(Event::Delete(pod)) => {
                pods.remove(pod.metadata.name.as_deref().unwrap_or_default());
            }
            Err(e) => {
                tracing::warn!(namespace = %cfg.namespace, "kubernetes watch failed: {e}; retrying, keeping the {} pods known", pods.len());
                continue;
            }
        }
        if listing.is_none() {
            publish.publish(pods.values().cloned().collect());
        }
    }
}

/// The pod's name and target, or `None` while it is not one (no IP yet, terminating,
/// finished, or without the port).
fn target(cfg: &KubernetesSd, pod: &Pod) -> Option<(String, Found)> {
    let meta = &pod.metadata;
    let name = meta.name.clone()?;
    if meta.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return None;
    }
    let ip = status.pod_ip.as_deref().filter(|ip| !ip.is_empty())?;
    let annotations = meta.annotations.as_ref();
    let annotation = |key: &str| annotations.and_then(|a| a.get(key)).map(String::as_str);
    let port = match annotation("prometheus.io/port").and_then(|p| p.parse::<u16>().ok()) {
        Some(p) => p,
        None => container_port(cfg, pod)?,
    };
    let host = if ip.contains(':') { format!("[{ip}]") } else { ip.to_string() };
    let url = metrics_url("http", &format!("{host}:{port}"), annotation("prometheus.io/path").unwrap_or("/metrics"))
        .map_err(|e| tracing::warn!(pod = %name, "pod is not a target: {e}"))
        .ok()?;
    let mut labels = BTreeMap::from([
        ("discovery".to_string(), "kubernetes".to_string()),
        ("namespace".to_string(), cfg.namespace.clone()),
        ("pod".to_string(), name.clone()),
    ]);
    if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
        labels.insert("node".into(), node);
    }
    Some((name.clone(), Found { name: format!("{}/{name}", cfg.namespace), url, labels }))
}

/// `kubernetes.port` as a number, or the container port of that name.
fn container_port(cfg: &KubernetesSd, pod: &Pod) -> Option<u16> {
    if let Ok(n) = cfg.port.parse::<u16>() {
        return Some(n);
    }
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default();
    containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some(cfg.port.as_str()))
        .and_then(|p| u16::try_from(p.container_port).ok())
}
