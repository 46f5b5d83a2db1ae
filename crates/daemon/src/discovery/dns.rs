//! `dns`: targets from DNS names, resolved every `refresh` — a Kubernetes headless
//! Service's SRV records (`_metrics._tcp.vllm.llm.svc.cluster.local`: one per ready pod,
//! with its port), or its A/AAAA records with the configured port.
//!
//! The nameserver is the system's (`/etc/resolv.conf`), or `dns.nameserver` when set.
//! Answers are not cached: each refresh asks. A name that no longer exists (NXDOMAIN, no
//! records) gives no targets; a lookup that fails otherwise (a timeout, SERVFAIL) keeps the
//! targets the name gave before, as a brief DNS outage must not drop a fleet. A failure is
//! counted each time (`llm_slo_discovery_errors_total`) and logged once until it changes.

use std::collections::BTreeMap;
use std::time::Duration;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;

use super::found::{Found, metrics_url};
use super::publisher::Publisher;
use crate::config::{DnsRecord, DnsSd};

/// How long one lookup may take, all attempts together, before it counts as failed.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Keeps the names' targets published until the source is dropped.
pub async fn run(cfg: DnsSd, publish: Publisher) {
    let resolver = match resolver(&cfg) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(names = ?cfg.names, "dns discovery cannot start: {e}; it finds no targets");
            return;
        }
    };
    let mut by_name: BTreeMap<&str, Vec<Found>> = BTreeMap::new();
    // Per name, the failure logged last: a lookup failing the same way every refresh is
    // logged once, and again when it changes or clears.
    let mut failing: BTreeMap<&str, String> = BTreeMap::new();
    let mut ticks = tokio::time::interval(cfg.refresh);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        for name in &cfg.names {
            let failed = match tokio::time::timeout(LOOKUP_TIMEOUT, lookup(&resolver, &cfg, name)).await {
                Ok(Ok(found)) => {
                    by_name.insert(name, found);
                    if failing.remove(name.as_str()).is_some() {
                        tracing::info!(name = %name, "dns lookup succeeds again");
                    }
                    continue;
                }
                Ok(Err(e)) => format!("dns lookup failed: {e}"),
                Err(_) => format!("dns lookup timed out after {LOOKUP_TIMEOUT:?}"),
            };
            publish.failed("dns", 1);
            if failing.get(name.as_str()) != Some(&failed) {
                let kept = by_name.get(name.as_str()).map_or(0, Vec::len);
                tracing::warn!(name = %name, "{failed}; keeping the {kept} targets it gave before (logged again when the error changes)");
                failing.insert(name, failed);
            }
        }
        publish.publish(by_name.values().flatten().cloned().collect());
    }
}

/// The system's resolver, or one asking `dns.nameserver` only; without a cache, so that
/// every refresh sees the records as they are.
fn resolver(cfg: &DnsSd) -> Result<TokioResolver, String> {
    let mut builder = match cfg.nameserver {
        None => TokioResolver::builder_tokio().map_err(|e| format!("cannot read the system's DNS config: {e}"))?,
        Some(addr) => {
            let mut server = NameServerConfig::udp_and_tcp(addr.ip());
            for c in &mut server.connections {
                c.port = addr.port();
            }
            let config = ResolverConfig::from_parts(None, Vec::new(), vec![server]);
            TokioResolver::builder_with_config(config, TokioRuntimeProvider::default())
        }
    };
    builder.options_mut().cache_size = 0;
    builder.build().map_err(|e| format!("cannot build the resolver: {e}"))
}

/// The targets of one name now. A name without records gives none.
async fn lookup(resolver: &TokioResolver, cfg: &DnsSd, name: &str) -> Result<Vec<Found>, String> {
    let found = match cfg.record {
        DnsRecord::Srv => resolver.srv_lookup(name).await,
        DnsRecord::A => resolver.ipv4_lookup(name).await,
        DnsRecord::Aaaa => resolver.ipv6_lookup(name).await,
    };
    let lookup = match found {
        Ok(l) => l,
        Err(e) if e.is_no_records_found() || e.is_nx_domain() => return Ok(Vec::new()),
        Err(e) => return Err(e.to_string()),
    };
    let mut out = Vec::new();
    for record in lookup.answers() {
        let address = match &record.data {
            RData::SRV(srv) => {
                let host = srv.target.to_ascii();
                format!("{}:{}", host.trim_end_matches('.'), srv.port)
            }
            RData::A(a) => format!("{}:{}", a.0, cfg.port.unwrap_or_default()),
            RData::AAAA(a) => format!("[{}]:{}", a.0, cfg.port.unwrap_or_default()),
            // A CNAME on the way, or an unrelated record: not a target.
            _ => continue,
        };
        let url = metrics_url("http", &address, "/metrics").map_err(|e| format!("answer for {name}: {e}"))?;
        let labels = BTreeMap::from([("discovery".to_string(), "dns".to_string())]);
        out.push(Found { name: address, url, labels });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    Ok(out)
}
