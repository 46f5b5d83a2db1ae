//! One target at run time: its window store and health, and the task that scrapes it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use crate::canonical::{ScrapeWarning, Snapshot};
use crate::config::{Config, Target};
use crate::evaluate::incremental::Incremental;
use crate::parse::Limits;
use crate::scrape::{ClientError, FetchSpec, Fetcher, HttpClient, Reuse, ScrapeError, ingest_reusing};
pub use crate::target::TargetState;
use crate::target::{ScrapeFailure, Scraped, Transition};

use super::clock::Clock;

/// A target's config and shared state.
#[derive(Debug)]
pub struct TargetRuntime {
    pub config: Target,
    /// What discovery said about the target (docs/discovery.md#labels); empty for a static
    /// one. Discovery may change them without resetting the target.
    labels: Mutex<BTreeMap<String, String>>,
    state: Mutex<TargetState>,
    /// When the target left discovery or the config, Unix ms; [`PRESENT`] while it is there.
    vanished: AtomicI64,
    /// The incremental state of the target's windows: the evaluator's, one evaluation at a
    /// time (so never contended), apart from `state` so that computing reports from it
    /// does not hold up scrapes (docs/footprint.md#incremental-windows).
    evaluation: Mutex<Option<Incremental>>,
}

/// [`TargetRuntime::vanished`] of a target that is present.
const PRESENT: i64 = i64::MIN;

impl TargetRuntime {
    pub fn new(config: Target, max_window: Duration) -> Self {
        TargetRuntime::with_labels(config, BTreeMap::new(), max_window)
    }

    pub fn with_labels(config: Target, labels: BTreeMap<String, String>, max_window: Duration) -> Self {
        TargetRuntime {
            config,
            labels: Mutex::new(labels),
            state: Mutex::new(TargetState::new(max_window)),
            vanished: AtomicI64::new(PRESENT),
            evaluation: Mutex::new(None),
        }
    }

    /// The runtime of a target whose settings changed but whose source did not (a reload
    /// changed its interval, timeout or headers): it takes `old`'s windows, health and
    /// evaluation state, which are data and stay valid, and leaves `old` empty. `old`'s
    /// scrape loop is stopped first; a scrape it still finishes is lost.
    pub fn succeeding(old: &TargetRuntime, config: Target, labels: BTreeMap<String, String>) -> Self {
        let state = std::mem::replace(&mut *old.lock(), TargetState::new(Duration::ZERO));
        let evaluation = old.evaluation().take();
        TargetRuntime {
            config,
            labels: Mutex::new(labels),
            state: Mutex::new(state),
            vanished: AtomicI64::new(PRESENT),
            evaluation: Mutex::new(evaluation),
        }
    }

    pub fn labels(&self) -> BTreeMap<String, String> {
        self.labels.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set_labels(&self, labels: BTreeMap<String, String>) {
        *self.labels.lock().unwrap_or_else(|e| e.into_inner()) = labels;
    }

    /// When the target vanished (Unix ms), or `None` while it is present.
    pub fn vanished_ms(&self) -> Option<i64> {
        Some(self.vanished.load(Ordering::Acquire)).filter(|&ms| ms != PRESENT)
    }

    /// Marks the target vanished at `at_ms`, or present again with `None`.
    pub fn set_vanished(&self, at_ms: Option<i64>) {
        self.vanished.store(at_ms.unwrap_or(PRESENT), Ordering::Release);
    }

    /// The windows' incremental state, created on first use.
    pub fn evaluation(&self) -> MutexGuard<'_, Option<Incremental>> {
        self.evaluation.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state, even if a panic elsewhere poisoned the lock: a half-updated health
    /// record is better than a daemon that stops reporting.
    pub fn lock(&self) -> MutexGuard<'_, TargetState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records one scrape outcome taken at `start_ms`, and logs a change of state once.
    pub fn record(&self, start_ms: i64, took: Duration, outcome: Result<Snapshot, ScrapeError>) {
        let outcome = outcome.map(|s| Scraped::Snapshot(Arc::new(s)));
        self.record_reusing(start_ms, took, outcome, &mut Reuse::default());
    }

    /// [`TargetRuntime::record`] for a scrape from [`ingest_reusing`] with `reuse`, which
    /// learns the layout stored when it needs it.
    fn record_reusing(&self, start_ms: i64, took: Duration, outcome: Result<Scraped, ScrapeError>, reuse: &mut Reuse) {
        let name = &self.config.name;
        let outcome =
            outcome.map_err(|e| ScrapeFailure { reason: e.reason().to_string(), message: e.message().to_string() });
        let mut st = self.lock();
        let engine = outcome.as_ref().ok().map(|s| s.engine());
        let first_warnings = outcome.as_ref().ok().map(|s| first_of_each_reason(s, &st)).unwrap_or_default();
        let transition = st.observe_scraped(start_ms, Some(took), outcome);
        if reuse.wants_layout()
            && let Some((_, layout)) = st.windows.seq_range().end.checked_sub(1).and_then(|s| st.windows.point_at(s))
        {
            reuse.adopt(layout);
        }
        match transition {
            Transition::CameUp => {
                tracing::info!(target_name = %name, engine = engine.map(|e| e.as_str()), "target is up")
            }
            Transition::WentDown | Transition::ErrorChanged => {
                let error = st.health.last_error.as_deref().unwrap_or_default();
                tracing::warn!(target_name = %name, error, "scrape failed; target is down")
            }
            Transition::StillDown => tracing::debug!(target_name = %name, "scrape failed again"),
            Transition::StillUp => {}
        }
        // Once per target and reason: a target with a duplicate series has it in every
        // scrape, and llm_slo_scrape_warnings_total counts the rest.
        for w in first_warnings {
            tracing::warn!(
                target_name = %name,
                reason = w.reason.as_str(),
                "scrape accepted with a problem: {}; not logged again for this target, counted in llm_slo_scrape_warnings_total",
                w.message
            );
        }
    }
}

/// The first warning of each reason in `s` that the target has never had before.
fn first_of_each_reason(s: &Scraped, st: &TargetState) -> Vec<ScrapeWarning> {
    let mut out: Vec<ScrapeWarning> = Vec::new();
    for w in s.warnings() {
        if !st.health.warnings_total.contains_key(w.reason.as_str()) && !out.iter().any(|o| o.reason == w.reason) {
            out.push(w.clone());
        }
    }
    out
}

/// How a target is fetched, from the global and per-target config, through `client` (the
/// daemon's, shared by all its targets).
pub fn fetcher_for(cfg: &Config, t: &Target, client: &HttpClient) -> Result<Fetcher, ClientError> {
    Fetcher::with_client(
        client,
        FetchSpec {
            url: t.url.clone(),
            headers: t.headers.clone(),
            bearer_token_file: t.bearer_token_file.clone(),
            timeout: t.timeout,
            body_limit: cfg.scrape.body_limit,
            gzip: cfg.scrape.gzip,
            follow_redirects: t.follow_redirects,
        },
    )
}

pub fn limits_for(cfg: &Config) -> Limits {
    Limits { max_body_bytes: cfg.scrape.body_limit, ..Limits::default() }
}

/// Scrapes one target every interval until `stop` turns true. Failures are recorded, never
/// returned: a bad target must not take the daemon or other targets down.
///
/// The first scrape is after `first_after` ([`first_scrape_after`]); the later ones keep a
/// phase within the interval that [`phase`] takes from the target's name, as Prometheus
/// offsets each target's scrapes. Targets that start together (a config of thousands) would
/// otherwise all be scraped at the same instant each interval: as many connections, bodies
/// in memory and parses on the blocking pool at once as there are targets
/// (docs/footprint.md#b-aggregator).
pub async fn scrape_loop(
    rt: Arc<TargetRuntime>,
    fetcher: Fetcher,
    limits: Limits,
    clock: Arc<dyn Clock>,
    mut stop: watch::Receiver<bool>,
    first_after: Duration,
) {
    if !first_after.is_zero() {
        tokio::select! {
            _ = tokio::time::sleep(first_after) => {}
            _ = stop.changed() => return,
        }
    }
    let interval = rt.config.interval;
    let mut ticks = tokio::time::interval_at(Instant::now() + phase(&rt.config.name, interval), interval);
    // Keep the phase: a slow scrape delays nothing after it, missed ticks are dropped.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut first = true;
    let mut reuse = Reuse::default();
    loop {
        if !std::mem::take(&mut first) {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stop.changed() => return,
            }
        }
        if *stop.borrow() {
            return;
        }
        let start_ms = clock.now_ms();
        let began = Instant::now();
        tokio::select! {
            () = scrape_once(&rt, &fetcher, limits, &mut reuse, start_ms, began) => {}
            _ = stop.changed() => return,
        }
    }
}

/// First scrapes started per second when many targets start at once, one every
/// millisecond: 10 000 first scrapes at the same instant timed out for their first 30–60 s
/// on two cores (docs/footprint.md#10-000-targets-with-full-windows), while
/// a handful of targets wait a few milliseconds.
const FIRST_SCRAPES_PER_SECOND: u64 = 1000;

/// When the `k`-th of the targets started together (from 0) is first scraped.
pub fn first_scrape_after(k: usize) -> Duration {
    Duration::from_micros(k as u64 * (1_000_000 / FIRST_SCRAPES_PER_SECOND))
}

/// Where in `interval` a target's scrapes fall after its first: in (0, interval], the same
/// for a name on every run and spread evenly over many names: FNV-1a, then MurmurHash3's
/// finalizer, since names that differ in their last character (`t1`, `t2`) leave FNV's
/// high bits close together.
pub fn phase(name: &str, interval: Duration) -> Duration {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    let nanos = interval.as_nanos().max(1);
    let offset = (u128::from(h) * nanos) >> 64;
    match offset {
        0 => interval,
        n => Duration::from_nanos(n as u64),
    }
}

/// Parses running at once, across every target: one per core.
fn parse_permits() -> &'static tokio::sync::Semaphore {
    static PERMITS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    PERMITS.get_or_init(|| tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(1, |n| n.get())))
}

/// Fetches, ingests and records one scrape taken at `start_ms`. `reuse` travels to the
/// blocking pool and back; a scrape cancelled or panicking there leaves the target a fresh
/// one (it only costs adapting the next scrapes afresh).
///
/// The scrape is stored on the blocking pool too: storing takes the target's lock, which
/// the target's first evaluation after a restore holds for a whole pass over its windows
/// (milliseconds), and a reactor thread waiting on it would stall every other target's
/// I/O with it.
async fn scrape_once(
    rt: &Arc<TargetRuntime>,
    fetcher: &Fetcher,
    limits: Limits,
    reuse: &mut Reuse,
    start_ms: i64,
    began: Instant,
) {
    let body = match fetcher.fetch().await {
        Ok(body) => body,
        Err(e) => return rt.record_reusing(start_ms, began.elapsed(), Err(e), reuse),
    };
    let hint = rt.config.engine;
    let (model, cardinality) = (rt.config.model.clone(), rt.config.cardinality);
    let mut r = std::mem::take(reuse);
    // Parsing a large body is CPU work; keep it off the reactor threads. A panic in the
    // adapter becomes an error for this target only. At most one parse per core runs at
    // once: thousands of targets would otherwise start as many blocking threads, all
    // contending for the allocator (docs/footprint.md#how-the-daemon-keeps-up-at-scale).
    let Ok(permit) = parse_permits().acquire().await else {
        let closed = ScrapeError::new("internal", "the parse queue is closed".to_string());
        return rt.record_reusing(start_ms, began.elapsed(), Err(closed), reuse);
    };
    let target = rt.clone();
    let ingested = tokio::task::spawn_blocking(move || {
        let out = ingest_reusing(&body, &limits, cardinality, hint, &model, &mut r);
        target.record_reusing(start_ms, began.elapsed(), out, &mut r);
        r
    });
    let ingested = ingested.await;
    drop(permit);
    match ingested {
        Ok(r) => *reuse = r,
        Err(e) => {
            let failed = ScrapeError::new("internal", format!("processing the scrape failed: {e}"));
            rt.record_reusing(start_ms, began.elapsed(), Err(failed), reuse);
        }
    }
}
