//! State that survives restarts (docs/architecture.md#state-that-survives-restarts): every
//! target's window store, the alert states, the request series and the error-budget
//! ledgers, written to `state_dir` every `state_snapshot_interval` and on shutdown, and
//! read back at start.
//!
//! The core saves and restores each part ([`crate::window::saved`], [`crate::alert::saved`],
//! [`crate::request::SavedRequests`], [`crate::budget::SavedBudgets`]); this module frames
//! them ([`format`]), writes the file atomically ([`file`]) and decides per section what
//! still matches the config ([`restore`]). A snapshot that cannot be written leaves the
//! daemon running on its in-memory state, with an error logged and counted ([`metrics`]).

pub mod file;
pub mod format;
pub mod metrics;
pub mod restore;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::alert::saved::SavedAlert;
use crate::budget::BudgetBook;
use crate::config::{Config, StateConfig, Target};
use crate::daemon::target::TargetRuntime;
use crate::request::RequestStore;
use crate::window::saved::SavedWindows;
use format::{Part, Section};
use metrics::{SnapshotError, StateStats};

/// Identifies what a target scrapes, without writing its URL (which may carry
/// credentials) to disk.
pub fn identity(t: &Target) -> u32 {
    crc32fast::hash(format!("{}\n{:?}", t.url.as_str(), t.engine).as_bytes())
}

/// What a snapshot reads.
#[derive(Clone)]
pub struct Sources {
    pub targets: Vec<Arc<TargetRuntime>>,
    pub book: Arc<Mutex<BudgetBook>>,
    pub store: Arc<Mutex<RequestStore>>,
}

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
    /// A snapshot is being written: a slow disk skips ticks rather than piling them up.
    busy: Arc<AtomicBool>,
    /// The last snapshot failed: the next failure is not logged again, a success is.
    failing: Arc<AtomicBool>,
}

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
            busy: Arc::default(),
            failing: Arc::default(),
        }
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

    /// Writes a snapshot of the state at `now_ms` on the blocking pool. Unless `wait`, a
    /// snapshot still being written makes this one a no-op, and this returns once it is
    /// started.
    pub async fn snapshot(&mut self, now_ms: i64, alerts: Vec<SavedAlert>, wait: bool) {
        if wait {
            // The shutdown snapshot waits for a scheduled one to finish: both write the
            // same temporary file.
            for _ in 0..100 {
                if !self.busy.load(Ordering::Acquire) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        if self.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        self.last_ms = Some(now_ms);
        let mut sources = self.sources.clone();
        if let Some(running) = &self.running {
            sources.targets = running();
        }
        let (ids, dir, max_size) = (self.identities.clone(), self.cfg.dir.clone(), self.cfg.max_size);
        let (stats, busy, failing) = (self.stats.clone(), self.busy.clone(), self.failing.clone());
        let work = tokio::task::spawn_blocking(move || {
            let began = std::time::Instant::now();
            let frames = capture(&sources, &ids, alerts);
            // Sections are written alerts first, then budgets, request series and windows; one
            // that would take the file past `state_max_size` is left out (that part of that
            // target restarts empty) and counted as `too_large`.
            let result = file::write_atomic(&dir, &format::header(now_ms), frames, max_size);
            if let Ok(w) = &result {
                tracing::debug!(bytes = w.bytes, took = ?began.elapsed(), "state snapshot written");
            }
            report(&dir, result, max_size, now_ms, &stats, &failing);
            restore::release_freed_memory();
            busy.store(false, Ordering::Release);
        });
        if wait {
            let _ = work.await;
        }
    }
}

/// Logs and counts a write's outcome.
fn report(
    dir: &std::path::Path,
    result: std::io::Result<file::Written>,
    max_size: u64,
    now_ms: i64,
    stats: &StateStats,
    failing: &AtomicBool,
) {
    match result {
        Ok(w) => {
            stats.written(now_ms, w.bytes);
            if w.left_out > 0 {
                stats.failed(SnapshotError::TooLarge);
                tracing::warn!(
                    sections = w.left_out,
                    max_bytes = max_size,
                    "state snapshot reached state_max_size; the sections left out (window stores first) will start empty after a restart: raise state_max_size (and the state_dir volume's size) to keep them"
                );
            }
            if failing.swap(false, Ordering::AcqRel) {
                tracing::info!(dir = %dir.display(), "state snapshots are being written again");
            }
        }
        Err(e) => {
            stats.failed(SnapshotError::Io);
            if !failing.swap(true, Ordering::AcqRel) {
                tracing::error!(
                    dir = %dir.display(),
                    "cannot write the state snapshot: {e}; the daemon keeps running on its in-memory state, which a restart will lose. Make state_dir writable and give it space (llm_slo_state_snapshot_errors_total counts the failures)"
                );
            }
        }
    }
}

/// Every section, framed, in the order the size bound keeps them: alerts, budgets and
/// request series (small, and costly to lose) before the window stores.
fn capture<'a>(
    sources: &'a Sources,
    ids: &'a BTreeMap<String, u32>,
    alerts: Vec<SavedAlert>,
) -> impl Iterator<Item = Vec<u8>> + 'a {
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
    {
        let store = sources.store.lock().unwrap_or_else(|e| e.into_inner());
        for t in ids.keys() {
            let saved = store.saved(t);
            if !saved.is_empty() {
                sections.push(section(t, Part::Requests(saved)));
            }
        }
    }
    let small: Vec<Vec<u8>> = sections.iter().filter_map(format::frame).collect();
    // The window stores are encoded one at a time as the file is written: the whole
    // snapshot is never in memory at once.
    let windows = sources.targets.iter().filter_map(move |rt| {
        // The clone shares the columns: the target's lock is held for a few words per point.
        let windows = rt.lock().windows.clone();
        if windows.is_empty() || !ids.contains_key(&rt.config.name) {
            return None;
        }
        format::frame(&section(&rt.config.name, Part::Windows(SavedWindows::save(&windows))))
    });
    small.into_iter().chain(windows)
}
