//! `discovery:` (docs/discovery.md): where targets come from besides the static `targets:`
//! list, each entry one source (`file_sd`, `dns` or `kubernetes`), checked here with every
//! error at the value that causes it.

use std::time::Duration;

use super::error::Diagnostics;
use super::raw::{RawDiscovery, RawDiscoveryLimits, RawDns, RawFileSd, RawKubernetes, S};
use crate::duration::parse_positive_duration;

/// How often `file_sd` files are read again even without a change, and DNS names resolved.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(30);

/// Most discovered targets scraped at once, all sources together: the aggregator's measured
/// size (docs/footprint.md#10-000-targets-with-full-windows: 10 000 targets with full 6 h
/// windows in 3.6 GiB on two cores). The daemon lowers it further to what the descriptor
/// limit leaves room for (crate::discovery::limits).
pub const DEFAULT_MAX_DISCOVERED_TARGETS: usize = 10_000;

/// `discovery_limits:` (docs/discovery.md#limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscoveryLimits {
    /// Most discovered targets scraped; those past it, in name order, are refused.
    pub max_targets: usize,
}

impl Default for DiscoveryLimits {
    fn default() -> Self {
        DiscoveryLimits { max_targets: DEFAULT_MAX_DISCOVERED_TARGETS }
    }
}

/// A build without the `kubernetes` cargo feature (a plain `cargo build`) refuses
/// `kubernetes:` discovery in `check`, `run` and on reload alike, rather than start a source
/// that can find nothing.
const NO_KUBERNETES: &str = "kubernetes discovery is not in this build of goodput: rebuild it with \
     `cargo build --release --features kubernetes`, or run the container image, which has it \
     (docs/discovery.md#kubernetes)";

/// One `discovery:` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discovery {
    FileSd(FileSd),
    Dns(DnsSd),
    Kubernetes(KubernetesSd),
}

impl Discovery {
    /// The source's name, as the `discovery` label and the logs give it.
    pub fn kind(&self) -> &'static str {
        match self {
            Discovery::FileSd(_) => "file_sd",
            Discovery::Dns(_) => "dns",
            Discovery::Kubernetes(_) => "kubernetes",
        }
    }
}

/// `file_sd:` Prometheus's file format, JSON or YAML, from every file the patterns match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSd {
    /// Glob patterns (`*`, `?`, `[…]` in the last path element, as Prometheus allows).
    pub files: Vec<String>,
    pub refresh: Duration,
}

/// `dns:` names resolved every `refresh`: A/AAAA records with `port`, or SRV records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsSd {
    pub names: Vec<String>,
    pub record: DnsRecord,
    /// The port of A/AAAA targets; SRV records carry their own.
    pub port: Option<u16>,
    pub refresh: Duration,
    /// The DNS server asked; `None` for the system's (`/etc/resolv.conf`).
    pub nameserver: Option<std::net::SocketAddr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DnsRecord {
    A,
    Aaaa,
    Srv,
}

/// `kubernetes:` the pods of one namespace matching a label selector, watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesSd {
    pub namespace: String,
    /// A Kubernetes label selector (`app=vllm,tier in (gpu)`), passed to the API as written.
    pub selector: String,
    /// The container port's name (`metrics`) or number.
    pub port: String,
}

pub(super) fn discovery_section(d: &mut Diagnostics, raw: Option<&S<Vec<S<RawDiscovery>>>>) -> Vec<Discovery> {
    let Some(raw) = raw else { return Vec::new() };
    let mut out = Vec::new();
    for entry in &raw.value {
        let e = &entry.value;
        let written = [e.file_sd.is_some(), e.dns.is_some(), e.kubernetes.is_some()].iter().filter(|w| **w).count();
        if written != 1 {
            d.error(
                entry.pos,
                "each discovery entry sets exactly one of file_sd, dns, kubernetes; write one list item per source",
            );
            continue;
        }
        let found = if let Some(f) = &e.file_sd {
            file_sd(d, &f.value).map(Discovery::FileSd)
        } else if let Some(s) = &e.dns {
            dns(d, s).map(Discovery::Dns)
        } else if let Some(k) = &e.kubernetes {
            if !cfg!(feature = "kubernetes") {
                d.error(k.pos, NO_KUBERNETES);
            }
            kubernetes(d, &k.value).map(Discovery::Kubernetes)
        } else {
            None
        };
        out.extend(found);
    }
    out
}

pub(super) fn limits_section(d: &mut Diagnostics, raw: Option<&RawDiscoveryLimits>) -> DiscoveryLimits {
    let mut out = DiscoveryLimits::default();
    if let Some(m) = raw.and_then(|r| r.max_targets.as_ref()) {
        if m.value == 0 {
            d.error(
                m.pos,
                "discovery_limits.max_targets is 0, which would refuse every discovered target; give a limit of at least 1, or remove the discovery sources",
            );
        } else {
            out.max_targets = usize::try_from(m.value).unwrap_or(usize::MAX);
        }
    }
    out
}

fn refresh(d: &mut Diagnostics, raw: Option<&S<String>>, key: &str) -> Option<Duration> {
    match raw {
        None => Some(DEFAULT_REFRESH),
        Some(s) => parse_positive_duration(&s.value).map_err(|e| d.error(s.pos, format!("{key}: {e}"))).ok(),
    }
}

fn non_empty(d: &mut Diagnostics, list: &S<Vec<S<String>>>, key: &str, example: &str) -> Option<Vec<String>> {
    if list.value.is_empty() {
        d.error(list.pos, format!("{key} is empty; list at least one, e.g. [{example}]"));
        return None;
    }
    let mut out = Vec::new();
    for s in &list.value {
        if s.value.trim().is_empty() {
            d.error(s.pos, format!("an entry of {key} is empty; give e.g. {example}"));
            return None;
        }
        out.push(s.value.trim().to_string());
    }
    Some(out)
}

fn file_sd(d: &mut Diagnostics, raw: &RawFileSd) -> Option<FileSd> {
    let files = non_empty(d, &raw.files, "file_sd.files", "/etc/goodput/targets/*.json")?;
    for (s, f) in raw.files.value.iter().zip(&files) {
        if let Err(e) = glob::Pattern::new(f) {
            d.error(s.pos, format!("file_sd.files: {f:?} is not a valid pattern ({e})"));
            return None;
        }
    }
    Some(FileSd { files, refresh: refresh(d, raw.refresh.as_ref(), "file_sd.refresh")? })
}

fn dns(d: &mut Diagnostics, raw: &S<RawDns>) -> Option<DnsSd> {
    let r = &raw.value;
    let names = non_empty(d, &r.names, "dns.names", "_metrics._tcp.vllm.llm.svc.cluster.local")?;
    let record = match r.record.as_ref().map(|s| (s.value.trim().to_ascii_uppercase(), s.pos)) {
        None => DnsRecord::Srv,
        Some((t, _)) if t == "SRV" => DnsRecord::Srv,
        Some((t, _)) if t == "A" => DnsRecord::A,
        Some((t, _)) if t == "AAAA" => DnsRecord::Aaaa,
        Some((t, at)) => {
            d.error(at, format!("dns.type {t:?} is not supported; expected A, AAAA or SRV"));
            return None;
        }
    };
    let port = match &r.port {
        Some(p) => match u16::try_from(p.value) {
            Ok(n) if n > 0 => Some(n),
            _ => {
                d.error(p.pos, format!("dns.port {} is not a TCP port; expected 1 to 65535", p.value));
                return None;
            }
        },
        None => None,
    };
    if record != DnsRecord::Srv && port.is_none() {
        d.error(
            raw.pos,
            "dns with type A or AAAA needs `port:`, the engine's metrics port (SRV records carry their own)",
        );
        return None;
    }
    let nameserver = match &r.nameserver {
        None => None,
        Some(s) => match s.value.trim().parse::<std::net::SocketAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                d.error(s.pos, format!("dns.nameserver {:?} is not IP:PORT; write e.g. 10.96.0.10:53, or remove it to use /etc/resolv.conf", s.value));
                return None;
            }
        },
    };
    Some(DnsSd { names, record, port, refresh: refresh(d, r.refresh.as_ref(), "dns.refresh")?, nameserver })
}

fn kubernetes(d: &mut Diagnostics, raw: &RawKubernetes) -> Option<KubernetesSd> {
    let namespace = raw.namespace.value.trim().to_string();
    if namespace.is_empty() {
        d.error(raw.namespace.pos, "kubernetes.namespace is empty; give the namespace of the engine pods");
        return None;
    }
    let port = raw.port.value.trim().to_string();
    if port.is_empty() {
        d.error(raw.port.pos, "kubernetes.port is empty; give the container port's name (e.g. metrics) or number");
        return None;
    }
    let selector = raw.selector.as_ref().map(|s| s.value.trim().to_string()).unwrap_or_default();
    Some(KubernetesSd { namespace, selector, port })
}
