//! The evaluation loop: every `evaluation_interval` each target is evaluated, then the
//! report goes through what follows evaluation ([`Post`]: request-derived windows, error
//! budgets, GPU join, alert rules, delivery, the state snapshot) and is published.
//!
//! [`Post`] sits behind a lock that a tick holds from its evaluation to its publication, so
//! that a config reload (super::apply) lands between two ticks, whole: no tick evaluates
//! with one config and judges with another.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{Mutex, Notify, watch};
use tokio::time::MissedTickBehavior;

use super::budget::Budgets;
use super::clock::Clock;
use super::evaluator::{Evaluator, Roster};
use super::gpu::Gpus;
use super::requests::RequestPath;
use super::shutdown::{ALERT_FLUSH, SNAPSHOT_GRACE};
use crate::deliver::Delivery;
use crate::enrich::Enricher;
use crate::evaluate::EvalConfig;
use crate::report::Report;
use crate::serve::Shared;
use crate::state;

/// What happens to each report after evaluation: request-derived windows, error budgets, GPU
/// join, alert rules, delivery; and what a reload changes between ticks.
pub struct Post {
    pub requests: RequestPath,
    pub budgets: Budgets,
    pub enricher: Enricher,
    pub gpus: Gpus,
    pub delivery: Delivery,
    /// `external_labels`, added to every alert.
    pub external_labels: Vec<(String, String)>,
    /// `None` without `state_dir`.
    pub state: Option<state::Keeper>,
    /// `evaluation_interval`.
    pub every: Duration,
    /// What the evaluator evaluates at each tick (windows, quantiles, SLOs, …).
    pub eval: Arc<ArcSwap<EvalConfig>>,
    /// The targets evaluated, for the state snapshot to follow.
    pub roster: Roster,
    pub shared: Shared,
    pub clock: Arc<dyn Clock>,
}

/// The evaluation loop's state, shared with the reloader.
#[derive(Clone)]
pub struct Engine {
    pub post: Arc<Mutex<Post>>,
    /// Wakes the loop to take a new `evaluation_interval`.
    pub rearm: Arc<Notify>,
}

impl Engine {
    pub fn new(post: Post) -> Engine {
        Engine { post: Arc::new(Mutex::new(post)), rearm: Arc::default() }
    }
}

/// Evaluates every target each interval and publishes the report. The first report
/// comes one interval after start, when each target has had its first scrape; a reload
/// that changes the interval makes the next tick one new interval after it.
///
/// A tick waits for its evaluations at most half an interval: a target evaluating longer
/// is shown with its previous results (the `evaluator` module).
pub async fn evaluate_loop(evaluator: Evaluator, engine: Engine, mut stop: watch::Receiver<bool>) {
    let mut held = HeldRules::default();
    let mut every = engine.post.lock().await.every;
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = engine.rearm.notified() => {
                every = engine.post.lock().await.every;
                ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
                continue;
            }
            _ = stop.changed() => return abandon(&evaluator, &mut *engine.post.lock().await).await,
        }
        let mut guard = engine.post.lock().await;
        let post = &mut *guard;
        let clock = post.clock.clone();
        // A tick waits for its evaluations up to half an interval; shutdown does not wait for
        // it. Evaluations still running are abandoned: the process exit ends them.
        let began = std::time::Instant::now();
        let tick = evaluator.tick(clock.now_ms(), every / 2);
        let mut report: Report = tokio::select! {
            r = tick => r,
            _ = stop.changed() => return abandon(&evaluator, post).await,
        };
        let evaluated = began.elapsed();
        post.requests.apply(&mut report).await;
        let requests = began.elapsed();
        post.budgets.apply(&mut report).await;
        let budgets = began.elapsed();
        let cpu = thread_cpu();
        let mut notifications = post.enricher.apply(&mut report, post.gpus.sources.latest());
        let (alerts, alerts_cpu) = (began.elapsed(), thread_cpu().saturating_sub(cpu));
        crate::deliver::add_external_labels(&post.external_labels, &mut report, &mut notifications);
        post.delivery.submit(&notifications);
        held.log_armed(&report);
        let (now_ms, enriched) = (report.t_ms, began.elapsed());
        // For a large fleet, the status page's point and freeing the previous report and its
        // /metrics rendering take milliseconds: not on the async workers.
        let s = post.shared.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || s.publish(report)).await {
            tracing::error!("cannot publish the report: {e}");
        }
        // A tick longer than the interval skips the next (`RUST_LOG=goodput::tick=debug`
        // shows where a large fleet's tick goes: docs/footprint.md).
        tracing::debug!(
            target: "goodput::tick",
            evaluated = ?evaluated,
            enriched = ?(enriched - evaluated),
            requests = ?(requests - evaluated),
            budgets = ?(budgets - requests),
            rules = ?(alerts - budgets),
            rules_cpu = ?alerts_cpu,
            published = ?(began.elapsed() - enriched),
            "tick"
        );
        if let Some(keeper) = post.state.as_mut()
            && keeper.due(now_ms)
        {
            keeper.snapshot(now_ms, post.enricher.alerts().saved(|_| true));
        }
    }
}

/// CPU time of the calling thread: beside a step's wall time in the tick log, it tells work
/// from waiting for a core or a lock in a busy process.
fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Stops evaluating: says so when an evaluation is still running (a late one goes on in the
/// background after its tick), and writes the last state snapshot (within
/// [`SNAPSHOT_GRACE`]) while the alerts are flushed.
async fn abandon(evaluator: &Evaluator, post: &mut Post) {
    let running = evaluator.running();
    if running > 0 {
        tracing::info!(targets = running, "shutting down: abandoning the evaluation in progress");
    }
    let (now_ms, alerts) = (post.clock.now_ms(), post.enricher.alerts().saved(|_| true));
    let snapshot = async {
        if let Some(keeper) = post.state.as_mut() {
            keeper.last_snapshot(now_ms, alerts, SNAPSHOT_GRACE).await;
        }
    };
    tokio::join!(snapshot, last_flush(&post.delivery));
}

/// Gives queued resolutions and firing alerts a last chance to go out.
pub async fn last_flush(delivery: &Delivery) {
    if !delivery.flush(ALERT_FLUSH).await {
        tracing::warn!("shutting down with alert notifications still queued after {ALERT_FLUSH:?}");
    }
}

/// The (alert, target, model) triples whose rule still waits for window coverage, to log
/// when each starts judging.
#[derive(Default)]
struct HeldRules(std::collections::BTreeSet<(&'static str, String, String)>);

impl HeldRules {
    fn log_armed(&mut self, report: &Report) {
        let now: std::collections::BTreeSet<_> = report
            .alert_readiness
            .iter()
            .filter(|r| !r.ready)
            .map(|r| (r.alertname, r.target.clone(), r.model.clone()))
            .collect();
        let left: Vec<_> = self.0.difference(&now).collect();
        // Looked up in a set, built only in a tick where rules stopped waiting: a search of
        // the list per rule armed was quadratic in the fleet, and after a restart thousands
        // of targets' rules arm in the same tick.
        let judged: std::collections::HashSet<(&str, &str, &str)> = if left.is_empty() {
            Default::default()
        } else {
            report.alert_readiness.iter().map(|r| (r.alertname, r.target.as_str(), r.model.as_str())).collect()
        };
        for k in left.into_iter().filter(|k| judged.contains(&(k.0, k.1.as_str(), k.2.as_str()))) {
            tracing::info!(alertname = k.0, target_name = %k.1, model = %k.2, "alert rule armed: its windows are covered by data");
        }
        self.0 = now;
    }
}
