//! Evaluation one target at a time, so that a slow or huge target cannot hold back the
//! others' reports (docs/limits.md#evaluation).
//!
//! Each tick starts an evaluation of every target that is not still busy with an earlier
//! one, on the blocking pool, and waits for them until a deadline. The report is then
//! assembled from each target's current health and its *latest completed* evaluation: a
//! target whose evaluation runs late keeps its previous results, and its
//! `last_evaluation_ms` (`llm_slo_target_last_evaluation_timestamp_seconds`) says how old
//! they are. Its evaluation finishes in the background and is shown on a later tick.
//!
//! Each target's windows are evaluated incrementally (`evaluate::incremental`): the state
//! lives beside the target's store, not in it. An evaluation holds the target's lock only
//! to advance that state over the scrapes that came and went since the last tick (their
//! columns, not the windows' length), then computes every report from the state alone
//! with the lock released. So a tick copies no stored points, and a scrape waits at most
//! for that advance, never for a long evaluation. The state is behind its own lock, which
//! only this target's single running evaluation takes.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{Notify, Semaphore};

use super::target::TargetRuntime;
use crate::evaluate::incremental::Incremental;
use crate::evaluate::{EvalConfig, RateMode};
use crate::report::{ModelReport, Report, TargetReport};

/// One target's latest completed evaluation.
#[derive(Debug)]
struct Evaluated {
    t_ms: i64,
    /// Shared with the reports that carry them.
    models: Arc<Vec<ModelReport>>,
}

/// What the evaluator keeps per target between ticks.
#[derive(Debug, Default)]
struct Slot {
    /// An evaluation of this target is queued or running: a new tick does not start another.
    busy: AtomicBool,
    latest: Mutex<Option<Evaluated>>,
}

/// Clears a slot's `busy` flag when the evaluation ends, however it ends (done, panicked,
/// or dropped before it started).
struct Busy(Arc<Slot>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

/// How one target is evaluated at an instant ([`evaluate_one`]; tests slow it down).
type EvaluateFn = dyn Fn(&TargetRuntime, i64, &EvalConfig) -> Vec<ModelReport> + Send + Sync;

/// The targets being evaluated, in report order, each with its slot. Discovery and reload
/// replace the list ([`Roster::set`]); a target kept across a change keeps its slot.
#[derive(Clone, Default)]
pub struct Roster(Arc<RwLock<Vec<Entry>>>);

/// A target and what the evaluator keeps for it.
type Entry = (Arc<TargetRuntime>, Arc<Slot>);

impl Roster {
    /// Makes `targets` the evaluated set. A runtime already in the set (the same `Arc`)
    /// keeps its latest results, and so does one that replaced a runtime of the same name;
    /// a new target starts without.
    pub fn set(&self, targets: Vec<Arc<TargetRuntime>>) {
        let mut list = self.0.write().unwrap_or_else(|e| e.into_inner());
        // By address: a search of the old list per target would be quadratic in the fleet.
        // The old runtimes stay alive in the map, so no address in it can be a new one's.
        let old: std::collections::HashMap<*const TargetRuntime, Entry> =
            std::mem::take(&mut *list).into_iter().map(|e| (Arc::as_ptr(&e.0), e)).collect();
        // A runtime that took over a target's windows (its settings changed, its source did
        // not: super::fleet) keeps the target's slot too, found by name; built only then.
        let mut by_name: Option<std::collections::HashMap<&str, &Arc<Slot>>> = None;
        let kept: std::collections::HashSet<*const TargetRuntime> = targets.iter().map(Arc::as_ptr).collect();
        *list = targets
            .into_iter()
            .map(|rt| {
                let slot = match old.get(&Arc::as_ptr(&rt)) {
                    Some((_, s)) => s.clone(),
                    None => by_name
                        .get_or_insert_with(|| {
                            old.iter()
                                .filter(|(p, _)| !kept.contains(*p))
                                .map(|(_, (rt, s))| (rt.config.name.as_str(), s))
                                .collect()
                        })
                        .get(rt.config.name.as_str())
                        .map(|s| (*s).clone())
                        .unwrap_or_default(),
                };
                (rt, slot)
            })
            .collect();
    }

    /// The current targets and their slots.
    fn entries(&self) -> Vec<Entry> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The current targets.
    pub fn runtimes(&self) -> Vec<Arc<TargetRuntime>> {
        self.entries().into_iter().map(|(rt, _)| rt).collect()
    }
}

/// The daemon's targets, evaluated each tick and kept per target.
pub struct Evaluator {
    targets: Roster,
    /// What each tick evaluates; a config reload replaces it between ticks.
    eval: Arc<ArcSwap<EvalConfig>>,
    evaluate: Arc<EvaluateFn>,
    /// At most this many evaluations run at once: one per core, and at least two so that a
    /// single long evaluation cannot take the only one.
    permits: Arc<Semaphore>,
    /// Workers started per tick: as many as there are permits.
    workers: usize,
    /// The latest tick's number ([`Round`]).
    generation: Arc<AtomicU64>,
}

impl Evaluator {
    pub fn new(targets: Vec<Arc<TargetRuntime>>, eval: EvalConfig) -> Evaluator {
        let roster = Roster::default();
        roster.set(targets);
        Evaluator::over(roster, eval)
    }

    /// An evaluator of whatever `targets` holds at each tick.
    pub fn over(targets: Roster, eval: EvalConfig) -> Evaluator {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Evaluator {
            targets,
            eval: Arc::new(ArcSwap::from_pointee(eval)),
            evaluate: Arc::new(evaluate_one),
            permits: Arc::new(Semaphore::new(cores.max(2))),
            workers: cores.max(2),
            generation: Arc::default(),
        }
    }

    /// Where a config reload puts the evaluation settings the next tick uses.
    pub fn eval_handle(&self) -> Arc<ArcSwap<EvalConfig>> {
        self.eval.clone()
    }

    /// This evaluator with another evaluation function: a test's slow target.
    #[cfg(test)]
    pub(crate) fn with_evaluate(
        mut self,
        f: impl Fn(&TargetRuntime, i64, &EvalConfig) -> Vec<ModelReport> + Send + Sync + 'static,
    ) -> Self {
        self.evaluate = Arc::new(f);
        self
    }

    /// Workers a tick starts.
    #[cfg(test)]
    pub(crate) fn workers(&self) -> usize {
        self.workers
    }

    /// Evaluates every target that is free at `now_ms`, waits up to `wait` for those
    /// evaluations, and returns the report of the latest results, in config order.
    ///
    /// A few workers on the blocking pool, one per permit, take the targets in turn from a
    /// shared cursor: with thousands of targets, a task per target would pass each one
    /// through the async scheduler twice (permit, then the blocking pool), and at 10,000
    /// targets those hand-offs, not the evaluations, set how many a tick got through
    /// (docs/footprint.md#how-the-daemon-keeps-up-at-scale).
    pub async fn tick(&self, now_ms: i64, wait: Duration) -> Report {
        let entries = self.targets.entries();
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        let eval = self.eval.load_full();
        let round = Arc::new(Round {
            generation,
            latest: self.generation.clone(),
            left: AtomicUsize::new(entries.len()),
            entries: entries.clone(),
            next: AtomicUsize::new(0),
            done: Notify::new(),
        });
        if !entries.is_empty() {
            for _ in 0..self.workers {
                let (round, eval, evaluate) = (round.clone(), eval.clone(), self.evaluate.clone());
                let permits = self.permits.clone();
                tokio::spawn(async move {
                    let Ok(permit) = permits.acquire_owned().await else { return };
                    let job = tokio::task::spawn_blocking(move || {
                        round.work(now_ms, &eval, evaluate.as_ref());
                        drop(permit);
                    });
                    if let Err(e) = job.await {
                        tracing::error!("an evaluation worker failed: {e}");
                    }
                });
            }
            // Late evaluations go on and land in their slot; they are not cancelled. A worker
            // still waiting for a permit (held by one busy with a late target) finds the
            // round taken when it gets one.
            let _ = tokio::time::timeout(wait, round.done.notified()).await;
        }
        let began = std::time::Instant::now();
        let report = self.assemble_from(&entries, now_ms);
        tracing::debug!(target: "goodput::tick", assembled = ?began.elapsed(), "report assembled");
        report
    }

    /// How many targets have an evaluation queued or running (a late one goes on after its
    /// tick); shutdown abandons them.
    pub fn running(&self) -> usize {
        self.targets.entries().iter().filter(|(_, slot)| slot.busy.load(Ordering::Acquire)).count()
    }

    /// The report at `now_ms`: each target's current health and latest results.
    pub fn assemble(&self, now_ms: i64) -> Report {
        self.assemble_from(&self.targets.entries(), now_ms)
    }

    fn assemble_from(&self, entries: &[Entry], now_ms: i64) -> Report {
        let targets = entries
            .iter()
            .map(|(rt, slot)| {
                let (mut health, engine) = {
                    let st = rt.lock();
                    (st.health.clone(), st.engine())
                };
                let latest = slot.latest.lock().unwrap_or_else(|e| e.into_inner());
                health.last_evaluation_ms = latest.as_ref().map(|e| e.t_ms);
                health.labels = rt.labels();
                health.vanished_ms = rt.vanished_ms();
                let models = latest.as_ref().map(|e| e.models.clone()).unwrap_or_default();
                TargetReport { target: rt.config.name.clone(), engine, health, models }
            })
            .collect();
        Report { t_ms: now_ms, targets, limits: self.eval.load().limits(), ..Report::default() }
    }
}

/// One tick's pass over the targets, shared by its workers.
struct Round {
    /// This round's tick, and the latest tick's: a round that a later tick superseded
    /// stops taking targets, so that none is evaluated at an instant already past (the
    /// later round starts from the first target, and those already evaluated cost it
    /// only the scrapes since).
    generation: u64,
    latest: Arc<AtomicU64>,
    entries: Vec<Entry>,
    /// The next entry to take.
    next: AtomicUsize,
    /// Entries not yet taken and finished (evaluated or skipped); `done` is notified at 0.
    left: AtomicUsize,
    done: Notify,
}

impl Round {
    /// Takes and evaluates entries until none is left. A target still evaluating an
    /// earlier tick is skipped: its results come when done. A panic in one evaluation
    /// keeps that target's previous results and the worker goes on.
    fn work(&self, now_ms: i64, eval: &EvalConfig, evaluate: &EvaluateFn) {
        while self.latest.load(Ordering::Acquire) == self.generation {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            let Some((rt, slot)) = self.entries.get(i) else { return };
            // A target that left discovery keeps its last results, unchanged, until it
            // comes back or is dropped (docs/discovery.md#how-targets-come-and-go).
            if rt.vanished_ms().is_none() && !slot.busy.swap(true, Ordering::AcqRel) {
                let busy = Busy(slot.clone());
                let evaluated = std::panic::catch_unwind(AssertUnwindSafe(|| evaluate(rt, now_ms, eval)));
                match evaluated {
                    Ok(models) => {
                        *busy.0.latest.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some(Evaluated { t_ms: now_ms, models: Arc::new(models) });
                    }
                    Err(_) => tracing::error!(
                        target_name = %rt.config.name,
                        "evaluation failed; keeping the target's previous results"
                    ),
                }
                drop(busy);
            }
            if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
                self.done.notify_one();
            }
        }
    }
}

/// One target's models at `now_ms`: its windows' state advanced under the target's lock,
/// the reports computed after releasing it.
fn evaluate_one(rt: &TargetRuntime, now_ms: i64, eval: &EvalConfig) -> Vec<ModelReport> {
    #[cfg(feature = "test-hooks")]
    test_hooks::slow_evaluation();
    let cfg = eval.for_target(&rt.config.name);
    let mut evaluation = rt.evaluation();
    let state = match &mut *evaluation {
        Some(s) if s.matches(&cfg) => s,
        slot => slot.insert(Incremental::new(&cfg)),
    };
    state.advance(&mut rt.lock().windows, now_ms);
    state.reports(now_ms, &cfg, RateMode::Prometheus)
}

/// Hooks the integration tests use to reproduce conditions too slow or too rare to build
/// for real; compiled only with the `test-hooks` feature, which `cargo test` turns on.
#[cfg(feature = "test-hooks")]
mod test_hooks {
    use std::sync::atomic::{AtomicBool, Ordering};

    /// With `GOODPUT_TEST_EVALUATION_DELAY=<duration>`, every evaluation after the first
    /// takes that much longer, standing in for a huge target's evaluation.
    pub fn slow_evaluation() {
        static FIRST_DONE: AtomicBool = AtomicBool::new(false);
        let Some(delay) = std::env::var("GOODPUT_TEST_EVALUATION_DELAY").ok() else { return };
        let Ok(delay) = crate::duration::parse_duration(&delay) else { return };
        if FIRST_DONE.swap(true, Ordering::Relaxed) {
            tracing::info!(?delay, "test hook: this evaluation is held");
            std::thread::sleep(delay);
        }
    }
}
