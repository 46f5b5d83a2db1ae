//! One target at run time: its window store and health, and the task that scrapes it.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use crate::canonical::{Engine, Snapshot};
use crate::config::{Config, Target};
use crate::parse::Limits;
use crate::report::Health;
use crate::scrape::{FetchSpec, Fetcher, ScrapeError, ingest};
use crate::window::TargetWindows;

use super::clock::Clock;

/// What the scrape task writes and the evaluator reads.
#[derive(Debug)]
pub struct TargetState {
    pub windows: TargetWindows,
    pub health: Health,
    pub engine: Option<Engine>,
}

/// A target's config and shared state.
#[derive(Debug)]
pub struct TargetRuntime {
    pub config: Target,
    state: Mutex<TargetState>,
}

impl TargetRuntime {
    pub fn new(config: Target, max_window: Duration) -> Self {
        TargetRuntime {
            config,
            state: Mutex::new(TargetState {
                windows: TargetWindows::new(max_window),
                health: Health::default(),
                engine: None,
            }),
        }
    }

    /// The state, even if a panic elsewhere poisoned the lock: a half-updated health
    /// record is better than a daemon that stops reporting.
    pub fn lock(&self) -> MutexGuard<'_, TargetState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records one scrape outcome taken at `start_ms`.
    pub fn record(&self, start_ms: i64, took: Duration, outcome: Result<Snapshot, ScrapeError>) {
        let name = &self.config.name;
        let mut st = self.lock();
        st.health.last_scrape_duration_seconds = Some(took.as_secs_f64());
        match outcome {
            Ok(snapshot) => {
                if !st.health.up {
                    tracing::info!(target_name = %name, engine = snapshot.engine.as_str(), "target is up");
                }
                st.health.up = true;
                st.health.last_error = None;
                st.engine = Some(snapshot.engine);
                st.windows.push(start_ms, Arc::new(snapshot));
            }
            Err(e) => {
                let changed = st.health.up || st.health.last_error.as_deref() != Some(e.message());
                if changed {
                    tracing::warn!(target_name = %name, reason = e.reason(), error = e.message(), "scrape failed; target is down");
                } else {
                    tracing::debug!(target_name = %name, reason = e.reason(), "scrape failed again");
                }
                st.health.up = false;
                st.health.last_error = Some(e.to_string());
                *st.health.errors_total.entry(e.reason().to_string()).or_insert(0) += 1;
            }
        }
    }
}

/// How a target is fetched and parsed, from the global and per-target config.
pub fn fetcher_for(cfg: &Config, t: &Target) -> Result<Fetcher, String> {
    Fetcher::new(FetchSpec {
        url: t.url.clone(),
        headers: t.headers.clone(),
        bearer_token_file: t.bearer_token_file.clone(),
        timeout: t.timeout,
        body_limit: cfg.scrape.body_limit,
        gzip: cfg.scrape.gzip,
    })
}

pub fn limits_for(cfg: &Config) -> Limits {
    Limits { max_body_bytes: cfg.scrape.body_limit, ..Limits::default() }
}

/// Scrapes one target every interval until `stop` turns true. Failures are recorded, never
/// returned: a bad target must not take the daemon or other targets down.
pub async fn scrape_loop(
    rt: Arc<TargetRuntime>,
    fetcher: Fetcher,
    limits: Limits,
    clock: Arc<dyn Clock>,
    mut stop: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(rt.config.interval);
    // Keep the phase: a slow scrape delays nothing after it, missed ticks are dropped.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        let start_ms = clock.now_ms();
        let began = Instant::now();
        let outcome = tokio::select! {
            r = scrape_once(&rt, &fetcher, limits) => r,
            _ = stop.changed() => return,
        };
        rt.record(start_ms, began.elapsed(), outcome);
    }
}

async fn scrape_once(rt: &TargetRuntime, fetcher: &Fetcher, limits: Limits) -> Result<Snapshot, ScrapeError> {
    let body = fetcher.fetch().await?;
    let hint = rt.config.engine;
    let model = rt.config.model.clone();
    // Parsing a large body is CPU work; keep it off the reactor threads. A panic in the
    // adapter becomes an error for this target only.
    match tokio::task::spawn_blocking(move || ingest(&body, &limits, hint, &model)).await {
        Ok(r) => r,
        Err(e) => Err(ScrapeError::new("internal", format!("processing the scrape failed: {e}"))),
    }
}
