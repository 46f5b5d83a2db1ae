//! The set of targets at run time (docs/discovery.md): the config's `targets:` and what
//! the discovery sources find, reconciled whenever either changes.
//!
//! A target that appears gets a scrape loop at once, so it is scraped on the next tick. A
//! target that vanishes stops being scraped and evaluated but keeps its windows, results
//! and alert state for `scrape.target_grace`; if it comes back within that time (a pod
//! restarting under the same name, a file rewritten) it goes on where it was, otherwise
//! it is dropped. A target whose source changed (its URL, engine or model) starts afresh;
//! one whose other settings changed (interval, timeout, headers, …) keeps its windows and
//! is scraped with the new settings; one whose settings did not change keeps everything,
//! across discovery changes and reloads alike.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use super::clock::Clock;
use super::evaluator::Roster;
use super::target::{TargetRuntime, fetcher_for, first_scrape_after, limits_for, scrape_loop};
use crate::config::{Config, Target};
use crate::discovery::limits::{self, Admission, DiscoveryStats};
use crate::discovery::{Source, discovered_target};
use crate::scrape::{ClientError, HttpClient};

/// One target the fleet runs.
struct Member {
    rt: Arc<TargetRuntime>,
    /// Stops its scrape loop.
    stop: watch::Sender<bool>,
    /// When it vanished, while it waits out its grace.
    gone: Option<Instant>,
}

/// The running targets and the sources that find them.
pub struct Fleet {
    config: Arc<Config>,
    members: BTreeMap<String, Member>,
    sources: Vec<Source>,
    /// Notified by a source whose list changed.
    changed: Arc<Notify>,
    roster: Roster,
    clock: Arc<dyn Clock>,
    /// The one HTTP client (connection pool) every target is scraped through, or why it
    /// could not be built.
    client: Result<HttpClient, ClientError>,
    scrapes: JoinSet<()>,
    /// The discovered targets refused at the last reconcile (over the limit, or a name
    /// taken), so that only a change is counted and logged.
    admission: Admission,
    stats: Arc<DiscoveryStats>,
    /// Runtimes made before the fleet started (the static targets, with their restored
    /// state snapshot), adopted by the first reconcile instead of fresh ones.
    adopt: BTreeMap<String, Arc<TargetRuntime>>,
}

impl Fleet {
    /// The fleet of `config`'s static targets, started, with its discovery sources running.
    /// A runtime in `adopt` whose settings match its target's is used as it is (it holds
    /// the windows and alerts a state snapshot restored).
    pub fn start(
        config: Arc<Config>,
        roster: Roster,
        clock: Arc<dyn Clock>,
        adopt: Vec<Arc<TargetRuntime>>,
        stats: Arc<DiscoveryStats>,
    ) -> Fleet {
        let changed = Arc::new(Notify::new());
        let sources =
            config.discovery.iter().map(|d| Source::start(d.clone(), changed.clone(), stats.clone())).collect();
        let mut fleet = Fleet {
            config: config.clone(),
            members: BTreeMap::new(),
            sources,
            changed,
            roster,
            clock,
            client: HttpClient::new(),
            scrapes: JoinSet::new(),
            admission: Admission::default(),
            stats,
            adopt: adopt.into_iter().map(|rt| (rt.config.name.clone(), rt)).collect(),
        };
        fleet.reconcile();
        fleet.adopt.clear();
        fleet
    }

    /// Reconciles on every change of the config (a reload), of a source's list, and each
    /// second for the grace periods, until `stop`.
    pub async fn run(mut self, mut configs: watch::Receiver<Arc<Config>>, mut stop: watch::Receiver<bool>) {
        let mut ticks = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            let second = tokio::select! {
                _ = stop.changed() => return,
                r = configs.changed() => {
                    if r.is_err() {
                        return;
                    }
                    let next = configs.borrow_and_update().clone();
                    self.apply(next);
                    false
                }
                _ = self.changed.notified() => false,
                _ = ticks.tick() => true,
            };
            // Between changes only a grace period can end: a reconcile compares every
            // target's settings, which at 10 000 targets is not free each second.
            if !second || self.members.values().any(|m| m.gone.is_some()) {
                self.reconcile();
            }
            // Reap the loops that ended (stopped targets).
            while let Some(Some(_)) = futures_util::FutureExt::now_or_never(self.scrapes.join_next()) {}
        }
    }

    /// Takes a new config: sources whose settings did not change keep running (and what
    /// they found), the others are stopped and new ones started.
    fn apply(&mut self, config: Arc<Config>) {
        let mut old = std::mem::take(&mut self.sources);
        for d in &config.discovery {
            match old.iter().position(|s| s.config == *d) {
                Some(i) => self.sources.push(old.swap_remove(i)),
                None => self.sources.push(Source::start(d.clone(), self.changed.clone(), self.stats.clone())),
            }
        }
        // The fetch settings outside the targets' own: every loop starts again with them.
        let fetch = |c: &Config| (c.scrape.body_limit, c.scrape.gzip);
        let refetch = fetch(&self.config) != fetch(&config);
        // Windows added or removed: every store keeps what the longest one reads, from now on.
        if self.config.max_window() != config.max_window() {
            for m in self.members.values() {
                m.rt.lock().windows.set_max_window(config.max_window());
            }
        }
        self.config = config;
        if refetch {
            for (k, m) in self.members.values_mut().filter(|m| m.gone.is_none()).enumerate() {
                let first = first_scrape_after(k);
                m.stop = spawn(&self.config, &self.client, &mut self.scrapes, &self.clock, m.rt.clone(), first);
            }
        }
    }

    /// Every target that should run now, static ones first in config order, then the
    /// discovered ones by name, as many as the limit allows (discovery::limits).
    fn desired(&mut self) -> Vec<(Target, BTreeMap<String, String>)> {
        let mut out: Vec<(Target, BTreeMap<String, String>)> =
            self.config.targets.iter().map(|t| (t.clone(), BTreeMap::new())).collect();
        let found: Vec<_> = self.sources.iter().flat_map(|s| s.found()).collect();
        let taken: HashSet<String> = out.iter().map(|(t, _)| t.name.clone()).collect();
        let c = &self.config;
        // The 1 is the webhook or the dcgm-exporter, should there be one (listen::fds).
        let others = c.targets.len() + c.alerting.alertmanager_urls().len() + 1;
        let nofile = crate::listen::fds::nofile_limit();
        let listeners = limits::listener_descriptors(c, nofile);
        let limit = limits::fit(c.discovery_limits.max_targets, nofile, others, listeners);
        for f in self.admission.admit(found, &taken, limit, &self.stats) {
            out.push((discovered_target(&self.config, &f), f.labels));
        }
        out
    }

    /// Starts, keeps, retires and drops members to match [`Fleet::desired`], then hands
    /// the evaluator the new list.
    fn reconcile(&mut self) {
        let desired = self.desired();
        // The loops started by this reconcile, paced (target::first_scrape_after).
        let mut started = 0;
        let mut order = Vec::with_capacity(desired.len());
        let mut wanted: HashSet<String> = HashSet::new();
        for (t, labels) in desired {
            wanted.insert(t.name.clone());
            order.push(t.name.clone());
            match self.members.get_mut(&t.name) {
                Some(m) if m.rt.config == t => {
                    if m.rt.labels() != labels {
                        m.rt.set_labels(labels);
                    }
                    if m.gone.take().is_some() {
                        tracing::info!(target_name = %t.name, "target is back; it keeps its windows");
                        m.rt.set_vanished(None);
                        let first = first_scrape_after(started);
                        started += 1;
                        m.stop = spawn(&self.config, &self.client, &mut self.scrapes, &self.clock, m.rt.clone(), first);
                    }
                }
                existing => {
                    let mut kept = None;
                    if let Some(m) = existing {
                        let _ = m.stop.send(true);
                        if same_source(&m.rt.config, &t) {
                            tracing::info!(target_name = %t.name, "target settings changed; it keeps its windows");
                            kept = Some(Arc::new(TargetRuntime::succeeding(&m.rt, t.clone(), labels.clone())));
                        } else {
                            tracing::info!(target_name = %t.name, "target source changed (url, engine or model); it starts with empty windows");
                        }
                    } else {
                        tracing::info!(target_name = %t.name, url = %crate::redact::url(&t.url), "target added");
                    }
                    let rt = match (kept, self.adopt.remove(&t.name).filter(|rt| rt.config == t)) {
                        (Some(rt), _) => rt,
                        (None, Some(rt)) => {
                            rt.set_labels(labels);
                            rt
                        }
                        (None, None) => Arc::new(TargetRuntime::with_labels(t, labels, self.config.max_window())),
                    };
                    let stop = spawn(
                        &self.config,
                        &self.client,
                        &mut self.scrapes,
                        &self.clock,
                        rt.clone(),
                        first_scrape_after(started),
                    );
                    started += 1;
                    self.members.insert(rt.config.name.clone(), Member { rt, stop, gone: None });
                }
            }
        }
        let grace = self.config.scrape.target_grace;
        let now_ms = self.clock.now_ms();
        self.members.retain(|name, m| {
            if wanted.contains(name) {
                return true;
            }
            match m.gone {
                None => {
                    let _ = m.stop.send(true);
                    m.gone = Some(Instant::now());
                    m.rt.set_vanished(Some(now_ms));
                    tracing::info!(target_name = %name, grace = %crate::duration::format_duration(grace), "target vanished; its windows are kept for the grace period");
                    true
                }
                Some(at) if at.elapsed() < grace => true,
                Some(_) => {
                    tracing::info!(target_name = %name, "target dropped: it did not come back within scrape.target_grace");
                    false
                }
            }
        });
        // Vanished members after the present ones, by name.
        order.extend(self.members.iter().filter(|(_, m)| m.gone.is_some()).map(|(n, _)| n.clone()));
        let list = order.iter().filter_map(|n| self.members.get(n)).map(|m| m.rt.clone()).collect();
        self.roster.set(list);
    }
}

/// Whether two settings of a target scrape the same source: the same URL (credentials
/// aside: a rotated password is the same engine), engine and model. A target whose other
/// settings change keeps its windows (config::changes::same_source says the same).
fn same_source(a: &Target, b: &Target) -> bool {
    crate::redact::url(&a.url) == crate::redact::url(&b.url) && a.engine == b.engine && a.model == b.model
}

/// Starts the scrape loop of `rt`, its first scrape `first_after` from now; the returned
/// sender stops it (so does dropping it).
fn spawn(
    config: &Config,
    client: &Result<HttpClient, ClientError>,
    scrapes: &mut JoinSet<()>,
    clock: &Arc<dyn Clock>,
    rt: Arc<TargetRuntime>,
    first_after: Duration,
) -> watch::Sender<bool> {
    let (stop, stopped) = watch::channel(false);
    match client.as_ref().map_err(Clone::clone).and_then(|c| fetcher_for(config, &rt.config, c)) {
        Ok(fetcher) => {
            let run = scrape_loop(rt, fetcher, limits_for(config), clock.clone(), stopped, first_after);
            scrapes.spawn(crate::wakes::in_task(run));
        }
        Err(e) => tracing::error!(target_name = %rt.config.name, "cannot scrape the target: {e}"),
    }
    stop
}
