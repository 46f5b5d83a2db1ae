//! What discovery may add (docs/discovery.md#limits): at most `discovery_limits.max_targets`
//! discovered targets are scraped, lowered to what the descriptor limit leaves room for,
//! and the rest are refused with a reason, counted and logged once per change.
//!
//! Which targets are kept does not depend on the order sources answer in: the found
//! targets are taken in name order, so the same list gives the same kept set on every
//! refresh, and a target past the limit stays refused instead of taking turns with others.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use super::found::Found;
use goodput_core::export::{Collector, Emit, Family, LabelValue, Labels, NoLabels, Unit};

use crate::listen::fds::{RESERVE_BASE, RESERVE_PER_DESTINATION};

/// Why a discovered target is not scraped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// Past `discovery_limits.max_targets` (or what the descriptor limit allows).
    MaxTargets,
    /// Its name is a static target's, or another discovered one's earlier in name order.
    NameTaken,
}

impl Refusal {
    pub const ALL: [Refusal; 2] = [Refusal::MaxTargets, Refusal::NameTaken];

    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::MaxTargets => "max_targets",
            Refusal::NameTaken => "name_taken",
        }
    }
}

/// The sources whose failures are counted in `llm_slo_discovery_errors_total`.
pub const COUNTED_SOURCES: [&str; 2] = ["file_sd", "dns"];

pub const LIMIT: &str = "llm_slo_discovery_targets_limit";
pub const REFUSED: &str = "llm_slo_discovery_targets_refused";
pub const REFUSED_TOTAL: &str = "llm_slo_discovery_targets_refused_total";
pub const ERRORS: &str = "llm_slo_discovery_errors_total";

goodput_core::label_set! {
    pub RefusedReason = [reason: Refusal];
    pub Source = [discovery];
}

impl LabelValue for Refusal {
    const ALL: &'static [Refusal] = &Refusal::ALL;
    fn as_str(self) -> &'static str {
        Refusal::as_str(self)
    }
}

/// Every family, in output order.
pub const FAMILIES: &[Family] = &[
    Family::gauge::<NoLabels>(
        LIMIT,
        Unit::Count,
        "Most discovered targets scraped: discovery_limits.max_targets, lowered to fit the descriptor limit.",
    ),
    Family::gauge::<RefusedReason>(
        REFUSED,
        Unit::Count,
        "Discovered targets not scraped now, by reason: max_targets (past the limit, in name order) or name_taken.",
    ),
    Family::counter::<RefusedReason>(
        REFUSED_TOTAL,
        Unit::Count,
        "Times a discovered target became refused, by reason.",
    ),
    Family::counter::<Source>(
        ERRORS,
        Unit::Count,
        "Failed reads of a discovery source (a file_sd pattern, file or file's metadata; a DNS lookup); each kept the targets it gave before.",
    ),
];

/// Discovery's counters, shared by the fleet, the sources and the /metrics handler.
#[derive(Debug)]
pub struct DiscoveryStats {
    limit: AtomicU64,
    refused: [AtomicU64; 2],
    refused_total: [AtomicU64; 2],
    errors: [AtomicU64; 2],
}

impl Default for DiscoveryStats {
    fn default() -> Self {
        DiscoveryStats {
            limit: AtomicU64::new(crate::config::DEFAULT_MAX_DISCOVERED_TARGETS as u64),
            refused: Default::default(),
            refused_total: Default::default(),
            errors: Default::default(),
        }
    }
}

impl DiscoveryStats {
    /// `n` failed reads of a source of kind `source` (`file_sd`, `dns`).
    pub fn errors_add(&self, source: &str, n: u64) {
        if let Some(i) = COUNTED_SOURCES.iter().position(|s| *s == source) {
            self.errors[i].fetch_add(n, Ordering::Relaxed);
        }
    }

    pub fn errors(&self, source: &str) -> u64 {
        COUNTED_SOURCES.iter().position(|s| *s == source).map_or(0, |i| self.errors[i].load(Ordering::Relaxed))
    }

    pub fn refused(&self, why: Refusal) -> u64 {
        self.refused[why as usize].load(Ordering::Relaxed)
    }

    pub fn refused_total(&self, why: Refusal) -> u64 {
        self.refused_total[why as usize].load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }
}

/// Discovery's counters, read at each GET of /metrics.
impl Collector for DiscoveryStats {
    fn families(&self) -> &'static [Family] {
        FAMILIES
    }

    fn collect(&self, out: &mut dyn Emit) {
        out.sample(LIMIT, Labels::new(&[], &[]), self.limit() as f64);
        for why in Refusal::ALL {
            out.sample(REFUSED, Labels::new(&[("reason", why.as_str())], &[]), self.refused(why) as f64);
        }
        for why in Refusal::ALL {
            out.sample(REFUSED_TOTAL, Labels::new(&[("reason", why.as_str())], &[]), self.refused_total(why) as f64);
        }
        for s in COUNTED_SOURCES {
            out.sample(ERRORS, Labels::new(&[("discovery", s)], &[]), self.errors(s) as f64);
        }
    }
}

/// The most discovered targets that fit under the descriptor limit `nofile`, beside
/// `others` outbound destinations (the static targets, the alert receivers, a webhook) and
/// `listeners` descriptors the listeners may hold (the HTTP server, the OTLP receiver, the
/// taps): each target keeps the reserve a static one has (crate::listen::fds). `configured`
/// when it fits, else the room left and why.
pub fn fit(configured: usize, nofile: Option<u64>, others: usize, listeners: u64) -> (usize, Option<String>) {
    let Some(nofile) = nofile else { return (configured, None) };
    let used = RESERVE_BASE + RESERVE_PER_DESTINATION * others as u64 + listeners;
    let room = (nofile.saturating_sub(used) / RESERVE_PER_DESTINATION) as usize;
    if configured <= room {
        return (configured, None);
    }
    let why = format!(
        "discovery_limits.max_targets lowered from {configured} to {room}: the descriptor limit (ulimit -n) is {nofile}, \
         and each discovered target needs {RESERVE_PER_DESTINATION} beside the {used} kept for the process, \
         {others} other destination(s) and the listeners' connections; raise the limit to scrape more"
    );
    (room, Some(why))
}

/// The descriptors `config`'s listeners may hold at their caps: a connection each, two for
/// a tap's (the client's and the upstream's).
pub fn listener_descriptors(config: &crate::config::Config, nofile: Option<u64>) -> u64 {
    let caps = crate::listen::fds::caps(config, nofile);
    let taps: usize = caps.taps.iter().map(|(_, c)| c).sum();
    (caps.server + caps.otlp) as u64 + 2 * taps as u64
}

/// How many examples a log line names.
const EXAMPLES: usize = 3;

/// The refusals of the last reconcile, to count and log only what changed.
#[derive(Debug, Default)]
pub struct Admission {
    refused: BTreeMap<Refusal, HashSet<String>>,
    /// The limit last in force, and why it was lowered (logged when it changes).
    limit: Option<(usize, Option<String>)>,
}

impl Admission {
    /// The targets of `found` that are scraped: each name once, none of `taken` (the static
    /// targets'), at most `limit`, in name order. The others are refused, counted in
    /// `stats` and logged when the refused set changes.
    pub fn admit(
        &mut self,
        mut found: Vec<Found>,
        taken: &HashSet<String>,
        limit: (usize, Option<String>),
        stats: &DiscoveryStats,
    ) -> Vec<Found> {
        let limit_changed = self.limit.as_ref() != Some(&limit);
        if limit_changed {
            stats.limit.store(limit.0 as u64, Ordering::Relaxed);
            self.limit = Some(limit.clone());
        }
        // Stable: equal names keep the order of the sources in the config.
        found.sort_by(|a, b| a.name.cmp(&b.name));
        let mut refused: BTreeMap<Refusal, HashSet<String>> = BTreeMap::new();
        // The first refused names of each reason, in name order, for the log.
        let mut examples: BTreeMap<Refusal, Vec<&str>> = BTreeMap::new();
        let mut keep = Vec::with_capacity(found.len());
        let mut seen: HashSet<&str> = HashSet::with_capacity(found.len().min(limit.0));
        for f in &found {
            let why = if taken.contains(&f.name) || !seen.insert(f.name.as_str()) {
                Some(Refusal::NameTaken)
            } else if seen.len() > limit.0 {
                Some(Refusal::MaxTargets)
            } else {
                None
            };
            if let Some(why) = why {
                refused.entry(why).or_default().insert(f.name.clone());
                let e = examples.entry(why).or_default();
                if e.len() < EXAMPLES {
                    e.push(f.name.as_str());
                }
            }
            keep.push(why.is_none());
        }
        drop(seen);
        for why in Refusal::ALL {
            let (now, before) = (refused.get(&why), self.refused.get(&why));
            let n = now.map_or(0, HashSet::len);
            let new = now.map_or(0, |n| n.iter().filter(|x| before.is_none_or(|b| !b.contains(*x))).count());
            if new > 0 || n != before.map_or(0, HashSet::len) || (why == Refusal::MaxTargets && limit_changed && n > 0)
            {
                let examples = examples.get(&why).map_or(String::new(), |e| e.join(", "));
                log_refused(why, n, &examples, found.len(), &limit);
            }
            // After the log line, so that a reader who sees the count finds the line too.
            stats.refused_total[why as usize].fetch_add(new as u64, Ordering::Relaxed);
            stats.refused[why as usize].store(n as u64, Ordering::Relaxed);
        }
        drop(examples);
        self.refused = refused;
        found.into_iter().zip(keep).filter_map(|(f, k)| k.then_some(f)).collect()
    }
}

fn log_refused(why: Refusal, n: usize, examples: &str, found: usize, (limit, lowered): &(usize, Option<String>)) {
    let limit = *limit;
    let lowered = lowered.as_ref().map_or(String::new(), |why| format!("; {why}"));
    match why {
        Refusal::MaxTargets if n == 0 => {
            tracing::info!(found, limit, "every discovered target is within discovery_limits.max_targets again")
        }
        Refusal::MaxTargets => tracing::warn!(
            found,
            limit,
            refused = n,
            "discovery found more targets than discovery_limits.max_targets: the first {limit} by name are scraped, {n} after them are not (e.g. {examples}){lowered}; llm_slo_discovery_targets_refused counts them (docs/discovery.md#limits)"
        ),
        Refusal::NameTaken if n == 0 => tracing::info!("no discovered target's name is taken any more"),
        Refusal::NameTaken => tracing::warn!(
            refused = n,
            "{n} discovered target(s) have a name another target already has and are not scraped (e.g. {examples}); names must be unique (docs/discovery.md#target-names)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(names: &[&str]) -> Vec<Found> {
        names
            .iter()
            .map(|n| Found {
                name: n.to_string(),
                url: url::Url::parse("http://10.0.0.1:8000/metrics").unwrap(),
                labels: Default::default(),
            })
            .collect()
    }

    fn names(f: &[Found]) -> Vec<&str> {
        f.iter().map(|f| f.name.as_str()).collect()
    }

    #[test]
    fn the_first_by_name_are_kept_whatever_order_they_come_in_and_the_rest_counted_once() {
        let stats = DiscoveryStats::default();
        let mut a = Admission::default();
        let taken = HashSet::from(["static".to_string()]);
        let kept = a.admit(found(&["d", "b", "static", "a", "c", "b"]), &taken, (2, None), &stats);
        assert_eq!(names(&kept), ["a", "b"]);
        assert_eq!((stats.refused(Refusal::MaxTargets), stats.refused(Refusal::NameTaken)), (2, 2));
        assert_eq!(stats.refused_total(Refusal::MaxTargets), 2);
        // The same targets in another order: the same kept set, nothing counted again.
        let kept = a.admit(found(&["c", "static", "b", "d", "a", "b"]), &taken, (2, None), &stats);
        assert_eq!(names(&kept), ["a", "b"]);
        assert_eq!((stats.refused_total(Refusal::MaxTargets), stats.refused_total(Refusal::NameTaken)), (2, 2));
        // One more past the limit: counted once.
        a.admit(found(&["a", "b", "c", "d", "e"]), &taken, (2, None), &stats);
        assert_eq!((stats.refused(Refusal::MaxTargets), stats.refused_total(Refusal::MaxTargets)), (3, 3));
        assert_eq!(stats.refused(Refusal::NameTaken), 0);
        let mut out = goodput_core::export::Collect::new(|_| None);
        stats.collect(&mut out);
        let out = out.finish();
        let value = |name, reason: Option<&str>| {
            out.iter().find(|s| s.name == name && s.labels.first().map(|l| l.1.as_str()) == reason).map(|s| s.value)
        };
        assert_eq!(value(REFUSED, Some("max_targets")), Some(3.0), "{out:?}");
        assert_eq!(value(LIMIT, None), Some(2.0), "{out:?}");
    }

    #[test]
    fn the_limit_fits_the_descriptors() {
        assert_eq!(fit(10_000, Some(1 << 20), 3, 256), (10_000, None));
        assert_eq!(fit(10_000, None, 3, 256), (10_000, None));
        // 1024 descriptors: 64 for the process, 2 for the one other destination, 256 for the
        // server leave 702, one target in two.
        let (n, why) = fit(10_000, Some(1024), 1, 256);
        assert_eq!(n, 351);
        assert!(why.unwrap().contains("lowered from 10000 to 351"));
        assert_eq!(fit(10_000, Some(100), 1, 256).0, 0);
    }
}
