//! State that survives restarts (docs/architecture.md#state-that-survives-restarts): every
//! target's window store, the alert states, the request series and the error-budget
//! ledgers, written to `state_dir` every `state_snapshot_interval` and on shutdown, and
//! read back at start.
//!
//! The core saves and restores each part ([`crate::window::saved`], [`crate::alert::saved`],
//! [`crate::request::SavedRequests`], [`crate::budget::saved::SavedBudgets`]); this module frames
//! them ([`format`]), writes the file atomically ([`file`]) and decides per section what
//! still matches the config ([`restore`]). A snapshot that cannot be written leaves the
//! daemon running on its in-memory state, with an error logged and counted ([`metrics`]).

pub mod file;
pub mod format;
pub mod metrics;
pub mod restore;
mod sources;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::alert::saved::SavedAlert;
use crate::config::{Config, StateConfig};
use crate::daemon::target::TargetRuntime;
use crate::window::saved::SavedWindows;
use file::Frame;
use format::{Listed, Part, Section};
use metrics::{SnapshotError, StateStats};

pub use sources::{Sources, identity};

/// The targets running now (discovery and reloads change them).
pub type Running = Arc<dyn Fn() -> Vec<Arc<TargetRuntime>> + Send + Sync>;

/// Writes snapshots on schedule and on shutdown, one at a time.
pub struct Keeper {
    cfg: StateConfig,
    stats: Arc<StateStats>,
    sources: Sources,
    /// Where the targets to save come from at each snapshot; without it, `sources.targets`.
    running: Option<Running>,
    identities: Arc<BTreeMap<String, u32>>,
    last_ms: Option<i64>,
    /// The write in progress, if any: a slow disk skips ticks rather than piling them up,
    /// and the write at shutdown gives it up.
    writing: Option<(Arc<file::Attempt>, JoinHandle<Done>)>,
    /// The last snapshot failed: the next failure is not logged again, a success is.
    failing: Arc<AtomicBool>,
}

/// How a write ended.
#[derive(Debug)]
enum Done {
    Written(file::Written),
    Failed,
    Abandoned,
}

/// How long past its deadline a write stuck where it cannot look at the clock (a target's
/// lock, a disk that does not answer) is waited for before it is given up from outside.
const STUCK_SLACK: Duration = Duration::from_millis(150);

impl Keeper {
    pub fn new(cfg: StateConfig, config: &Config, sources: Sources, stats: Arc<StateStats>) -> Keeper {
        let identities = config.targets.iter().map(|t| (t.name.clone(), identity(t))).collect();
        Keeper {
            cfg,
            stats,
            sources,
            running: None,
            identities: Arc::new(identities),
            last_ms: None,
            writing: None,
            failing: Arc::default(),
        }
    }

    /// Follows a reloaded config: the identities of its static targets, and its `state_*`
    /// keys, which the next snapshot uses (a new directory is written, never read). A
    /// write in progress to the old directory finishes there on its own.
    pub fn reconfigure(&mut self, cfg: StateConfig, config: &Config) {
        self.identities = Arc::new(config.targets.iter().map(|t| (t.name.clone(), identity(t))).collect());
        if cfg.dir != self.cfg.dir {
            self.writing = None;
        }
        self.cfg = cfg;
    }

    /// The counters this keeper counts in.
    pub fn stats(&self) -> Arc<StateStats> {
        self.stats.clone()
    }

    /// Saves the targets `running` lists at each snapshot. Only targets of the config's
    /// `targets:` are saved: a discovered one has no settings to match on restore.
    pub fn following(mut self, running: Running) -> Keeper {
        self.running = Some(running);
        self
    }

    /// Whether a snapshot is due at `now_ms` (the first one is an interval after start).
    pub fn due(&mut self, now_ms: i64) -> bool {
        let every = self.cfg.snapshot_interval.as_millis() as i64;
        let last = *self.last_ms.get_or_insert(now_ms);
        now_ms - last >= every
    }

    /// Starts writing a snapshot of the state at `now_ms` on the blocking pool and returns;
    /// a no-op while the previous one is still being written.
    pub fn snapshot(&mut self, now_ms: i64, alerts: Vec<SavedAlert>) {
        if self.writing.as_ref().is_some_and(|(_, h)| !h.is_finished()) {
            return;
        }
        self.last_ms = Some(now_ms);
        let attempt = Arc::new(file::Attempt::new(None));
        let work = self.spawn(now_ms, alerts, attempt.clone(), Duration::ZERO);
        self.writing = Some((attempt, work));
    }

    /// The snapshot at shutdown, written `within` from now or not at all: past it the write
    /// is given up, its temporary file removed, and the last complete snapshot stays as it
    /// was (the log says which). A scheduled write still in progress is given up first: this
    /// one holds newer state.
    pub async fn last_snapshot(&mut self, now_ms: i64, alerts: Vec<SavedAlert>, within: Duration) {
        let began = Instant::now();
        let deadline = began + within;
        let dir = self.cfg.dir.clone();
        if let Some((attempt, work)) = self.writing.take()
            && !work.is_finished()
            && attempt.abandon(&dir)
        {
            tracing::info!("shutting down: the scheduled state snapshot in progress is superseded by the last one");
        }
        let attempt = Arc::new(file::Attempt::new(Some(deadline.into_std())));
        let work = self.spawn(now_ms, alerts, attempt.clone(), test_hooks::held());
        let done = match tokio::time::timeout_at(deadline + STUCK_SLACK, work).await {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => {
                tracing::error!("the last state snapshot's writer failed: {e}");
                Done::Failed
            }
            Err(_) => {
                // Stuck where it cannot see the deadline: it may not rename any more.
                let a = attempt.clone();
                let d = dir.clone();
                let _ = tokio::time::timeout(STUCK_SLACK, tokio::task::spawn_blocking(move || a.abandon(&d))).await;
                Done::Abandoned
            }
        };
        match done {
            Done::Written(w) => tracing::info!(bytes = w.bytes, took = ?began.elapsed(), "last state snapshot written"),
            Done::Failed => {}
            Done::Abandoned => tracing::warn!(
                "the last state snapshot did not finish within {within:?} of the shutdown and was given up; {}",
                kept(&dir)
            ),
        }
    }

    /// Writes a snapshot of the state at `now_ms` on the blocking pool under `attempt`.
    fn spawn(
        &self,
        now_ms: i64,
        alerts: Vec<SavedAlert>,
        attempt: Arc<file::Attempt>,
        hold: Duration,
    ) -> JoinHandle<Done> {
        let mut sources = self.sources.clone();
        if let Some(running) = &self.running {
            sources.targets = running();
        }
        let (ids, dir, max_size) = (self.identities.clone(), self.cfg.dir.clone(), self.cfg.max_size);
        let (stats, failing) = (self.stats.clone(), self.failing.clone());
        tokio::task::spawn_blocking(move || {
            let began = Instant::now();
            let frames = capture(&sources, &ids, alerts, hold);
            // Sections are written alerts first, then budgets, request series, windows and
            // capacity histories; one that would take the file past `state_max_size` is
            // left out (that part of that target restarts empty) and counted as `too_large`.
            let result = file::write_atomic(&dir, &format::header(now_ms), frames, max_size, &attempt);
            if let Ok(w) = &result {
                tracing::debug!(bytes = w.bytes, took = ?began.elapsed(), "state snapshot written");
            }
            let done = report(&dir, result, max_size, now_ms, &stats, &failing);
            restore::release_freed_memory();
            done
        })
    }
}

/// What stays in `dir` when a snapshot is given up.
fn kept(dir: &std::path::Path) -> String {
    let path = file::path(dir);
    match std::fs::metadata(&path).and_then(|m| m.modified()) {
        Ok(at) => {
            let age = std::time::SystemTime::now().duration_since(at).unwrap_or_default();
            format!(
                "the snapshot written at {} ({:.0} s earlier) is kept, and a restart resumes from it without what changed since",
                humantime::format_rfc3339_seconds(at),
                age.as_secs_f64()
            )
        }
        Err(_) => format!("there is no earlier snapshot at {}: a restart starts with empty windows", path.display()),
    }
}

/// Logs and counts a write's outcome.
fn report(
    dir: &std::path::Path,
    result: Result<file::Written, file::WriteError>,
    max_size: u64,
    now_ms: i64,
    stats: &StateStats,
    failing: &AtomicBool,
) -> Done {
    match result {
        Ok(w) => {
            stats.written(now_ms, w.bytes);
            if w.left_out > 0 {
                stats.failed(SnapshotError::TooLarge);
                tracing::warn!(
                    sections = w.left_out,
                    max_bytes = max_size,
                    "state snapshot reached state_max_size; the sections left out (capacity histories, then window stores) will start empty after a restart: raise state_max_size (and the state_dir volume's size) to keep them"
                );
            }
            if failing.swap(false, Ordering::AcqRel) {
                tracing::info!(dir = %dir.display(), "state snapshots are being written again");
            }
            Done::Written(w)
        }
        Err(file::WriteError::Abandoned) => Done::Abandoned,
        Err(file::WriteError::Io(e)) => {
            stats.failed(SnapshotError::Io);
            if !failing.swap(true, Ordering::AcqRel) {
                tracing::error!(
                    dir = %dir.display(),
                    "cannot write the state snapshot: {e}; the daemon keeps running on its in-memory state, which a restart will lose. Make state_dir writable and give it space (llm_slo_state_snapshot_errors_total counts the failures)"
                );
            }
            Done::Failed
        }
    }
}

/// Every section, framed, in the order the size bound keeps them: first the list of the
/// sections that follow, then alerts, budgets and request series (small, and costly to
/// lose), the window stores, and the capacity histories (up to a day of intervals: past
/// `state_max_size` they are left out first, and the estimates start again). A section that cannot be framed keeps its place as an
/// empty frame, as one left out for size does.
fn capture<'a>(
    sources: &'a Sources,
    ids: &'a BTreeMap<String, u32>,
    alerts: Vec<SavedAlert>,
    hold: Duration,
) -> impl Iterator<Item = Frame<'a>> + 'a {
    let mut sections: Vec<Section> = Vec::new();
    let section = move |target: &str, part: Part| Section { target: target.to_string(), identity: ids[target], part };
    let mut by_target: BTreeMap<String, Vec<SavedAlert>> = BTreeMap::new();
    for a in alerts {
        if let Some(t) = a.labels.get("target").filter(|t| ids.contains_key(*t)) {
            by_target.entry(t.clone()).or_default().push(a);
        }
    }
    for (t, alerts) in by_target {
        sections.push(section(&t, Part::Alerts(alerts)));
    }
    {
        let book = sources.book.lock().unwrap_or_else(|e| e.into_inner());
        for t in ids.keys() {
            let saved = book.saved(t);
            if !saved.is_empty() {
                sections.push(section(t, Part::Budgets(saved)));
            }
        }
    }
    // The request series (up to a window's records per target) are encoded one target at a
    // time as the file is written: copied all at once they were the snapshot's whole size
    // again in memory at its peak (docs/footprint.md measured 73 MiB at 20 tapped targets).
    let requests: Vec<String> = {
        let store = sources.store.lock().unwrap_or_else(|e| e.into_inner());
        ids.keys().filter(|t| store.holds(t)).cloned().collect()
    };
    // The capacity histories (up to a day of intervals per model) are encoded one target
    // at a time as the file is written, as the window stores are, and after them.
    let capacity: Vec<String> = {
        let book = sources.capacity.lock().unwrap_or_else(|e| e.into_inner());
        ids.keys().filter(|t| book.holds(t)).cloned().collect()
    };
    let stores: Vec<&Arc<TargetRuntime>> = sources
        .targets
        .iter()
        .filter(|rt| ids.contains_key(&rt.config.name) && !rt.lock().windows.is_empty())
        .collect();
    let mut listed: Vec<Listed> =
        sections.iter().map(|s| Listed { target: s.target.clone(), part: s.part.name().into() }).collect();
    listed.extend(requests.iter().map(|t| Listed { target: t.clone(), part: "requests".into() }));
    // Each store, then its windows' incremental state if it has been evaluated.
    let stores: Vec<(&Arc<TargetRuntime>, bool)> =
        stores.into_iter().map(|rt| (rt, rt.evaluation().as_ref().is_some_and(|e| e.has_evaluated()))).collect();
    for (rt, evaluated) in &stores {
        listed.push(Listed { target: rt.config.name.clone(), part: "windows".into() });
        if *evaluated {
            listed.push(Listed { target: rt.config.name.clone(), part: "evaluation".into() });
        }
    }
    listed.extend(capacity.iter().map(|t| Listed { target: t.clone(), part: "capacity".into() }));
    let contents = Section { target: String::new(), identity: 0, part: Part::Contents(listed) };
    let framed = |s: &Section, buf| format::frame(s, buf).unwrap_or_else(|| format::LEFT_OUT.to_vec());
    let small: Vec<Frame> =
        std::iter::once(&contents).chain(&sections).map(|s| Frame::Bytes(framed(s, Vec::new()))).collect();
    // The window stores are encoded one at a time as the file is written: the whole
    // snapshot is never in memory at once. Each is followed by its windows' incremental
    // state, taken with it under the evaluation's lock and then the target's (the
    // evaluator's order), so that the two describe the same points.
    let windows = stores.into_iter().flat_map(move |(rt, evaluated)| {
        let (windows, evaluation) = {
            let mut evaluation = rt.evaluation();
            let mut st = rt.lock();
            let saved = evaluated.then(|| evaluation.as_mut().and_then(|e| e.saved(&mut st.windows)));
            // The clone shares the columns: the target's lock is held for a few words per point.
            (st.windows.clone(), saved)
        };
        std::thread::sleep(hold);
        let name = &rt.config.name;
        let windows: Frame =
            Frame::Make(Box::new(move |buf| framed(&section(name, Part::Windows(SavedWindows::save(&windows))), buf)));
        let evaluation =
            evaluation.map(|e| Frame::Make(Box::new(move |buf| framed(&section(name, Part::Evaluation(e)), buf))));
        std::iter::once(windows).chain(evaluation)
    });
    // Encoded under the store's lock, which only the evaluator also takes (the tap and the
    // OTLP receiver queue into the inbox): it waits at most one target's encoding.
    let store = &sources.store;
    let requests = requests.into_iter().map(move |t| {
        Frame::Make(Box::new(move |buf| {
            let store = store.lock().unwrap_or_else(|e| e.into_inner());
            format::frame_requests(&t, ids[&t], &store.saved_ref(&t), buf).unwrap_or_else(|| format::LEFT_OUT.to_vec())
        }))
    });
    let book = &sources.capacity;
    let capacity = capacity.into_iter().map(move |t| {
        Frame::Make(Box::new(move |buf| {
            let saved = book.lock().unwrap_or_else(|e| e.into_inner()).saved(&t);
            framed(&section(&t, Part::Capacity(saved)), buf)
        }))
    });
    small.into_iter().chain(requests).chain(windows).chain(capacity)
}

/// Hooks the integration tests use to reproduce a snapshot too slow to finish within the
/// shutdown bound; compiled only with the `test-hooks` feature, which `cargo test` turns on.
mod test_hooks {
    use std::time::Duration;

    /// With `GOODPUT_TEST_SNAPSHOT_DELAY=<duration>`, the snapshot written at shutdown holds
    /// each window store that long before writing it, standing in for a store too large
    /// (or a disk too slow) to write within the bound.
    pub fn held() -> Duration {
        #[cfg(feature = "test-hooks")]
        if let Some(d) =
            std::env::var("GOODPUT_TEST_SNAPSHOT_DELAY").ok().and_then(|d| crate::duration::parse_duration(&d).ok())
        {
            return d;
        }
        Duration::ZERO
    }
}
