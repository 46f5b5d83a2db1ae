//! What a source finds ([`Found`]) and how a found target becomes a scraped one: its URL
//! from Prometheus-style parts ([`metrics_url`]) and its scrape settings
//! ([`discovered_target`]).

use std::collections::BTreeMap;

use url::Url;

use crate::adapt::EngineHint;
use crate::config::{Config, Target};

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

/// Why a found address makes no target URL; the message names the value at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("__scheme__ {0:?} is not http or https")]
    Scheme(String),
    #[error("{0:?} is not a host:port address")]
    NotHostPort(String),
    #[error("{address:?}: {reason}")]
    Unparsable { address: String, reason: url::ParseError },
    #[error("{0:?} has no host")]
    NoHost(String),
}

/// The URL of a target at `address` (`host:port`), as Prometheus builds it from
/// `__scheme__`, `__address__` and `__metrics_path__`.
pub fn metrics_url(scheme: &str, address: &str, path: &str) -> Result<Url, AddressError> {
    if !matches!(scheme, "http" | "https") {
        return Err(AddressError::Scheme(scheme.to_string()));
    }
    if address.is_empty() || address.contains('/') || address.contains('@') {
        return Err(AddressError::NotHostPort(address.to_string()));
    }
    let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
    let url = Url::parse(&format!("{scheme}://{address}{path}"))
        .map_err(|reason| AddressError::Unparsable { address: address.to_string(), reason })?;
    if url.host().is_none() {
        return Err(AddressError::NoHost(address.to_string()));
    }
    Ok(url)
}
