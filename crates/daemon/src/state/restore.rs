//! Reading the snapshot back at start, section by section: a section is restored when its
//! target is still configured with the same URL and engine and its part still fits the
//! config (the core checks SLO, rule and window definitions); anything else starts empty.
//! Never an error: the worst snapshot costs the history it held, with one warning.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use super::format::{self, FileError, Part};
use super::metrics::{RestoreResult, StateStats};
use super::{Sources, file};
use crate::alert::AlertEngine;
use crate::config::Config;

/// How far past the daemon's clock a restored scrape may be: clock jitter, not a clock set back.
const FUTURE_SLACK_MS: i64 = 10_000;

/// What one restore found, for the log line and the tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub restored: u64,
    pub mismatch: u64,
    pub corrupt: u64,
    /// The file is of another format (or not a snapshot at all).
    pub version: Option<u32>,
    /// Targets with a part that starts empty.
    pub affected: BTreeSet<String>,
}

/// Restores what `dir`'s snapshot holds into the daemon's state, before any task starts.
pub fn restore(
    dir: &Path,
    config: &Config,
    sources: &Sources,
    alerts: &mut AlertEngine,
    stats: &StateStats,
    now_ms: i64,
) {
    let (reader, len) = match file::open(dir) {
        Ok(Some(r)) => r,
        Ok(None) => {
            tracing::info!(dir = %dir.display(), "no state snapshot yet; starting with empty windows");
            return;
        }
        Err(e) => {
            stats.restored(RestoreResult::Corrupt, 1);
            tracing::warn!(dir = %dir.display(), "cannot read the state snapshot: {e}; starting with empty windows");
            return;
        }
    };
    let o = apply_from(reader, len, config, sources, alerts, now_ms);
    release_freed_memory();
    stats.restored(RestoreResult::Restored, o.restored);
    stats.restored(RestoreResult::Mismatch, o.mismatch);
    stats.restored(RestoreResult::Corrupt, o.corrupt);
    if let Some(v) = o.version {
        stats.restored(RestoreResult::Version, 1);
        tracing::warn!(
            dir = %dir.display(),
            "the state snapshot is of format {v}, this goodput reads format {}; starting with empty windows (it is replaced at the next snapshot)",
            format::VERSION
        );
    } else if o.mismatch + o.corrupt > 0 {
        let targets: Vec<&str> = o.affected.iter().map(String::as_str).collect();
        tracing::warn!(
            restored = o.restored,
            mismatch = o.mismatch,
            corrupt = o.corrupt,
            "state snapshot partly restored; what no longer matches the config or did not read starts empty, for targets: {}",
            targets.join(", ")
        );
    } else {
        tracing::info!(sections = o.restored, "state restored from the snapshot");
    }
}

/// Hands the memory a restore or a snapshot freed back to the system. A restore's sections
/// (bytes and decoded form) lie on the heap below the stores rebuilt from them; a
/// snapshot's copies of the budget ledgers and its framed sections are freed once written.
/// With glibc's malloc and one arena, as a small fleet has (docs/footprint.md#memory),
/// freed memory goes back only from the top of the heap unless asked, and the daemon would
/// keep each peak in its RSS. Under mimalloc this trims glibc's own small heap only.
pub(super) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages to the system; it touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Restores each section of `bytes`.
pub fn apply(bytes: &[u8], config: &Config, sources: &Sources, alerts: &mut AlertEngine, now_ms: i64) -> Outcome {
    apply_from(bytes, bytes.len() as u64, config, sources, alerts, now_ms)
}

/// Restores each section of the `len` bytes `r` yields, one section at a time.
fn apply_from(
    r: impl Read,
    len: u64,
    config: &Config,
    sources: &Sources,
    alerts: &mut AlertEngine,
    now_ms: i64,
) -> Outcome {
    let mut o = Outcome::default();
    let sections = match format::read(r, len) {
        Ok((_, s)) => s,
        Err(FileError::Version(v)) => {
            o.version = Some(v);
            return o;
        }
        Err(FileError::NotASnapshot) => {
            o.corrupt = 1;
            return o;
        }
    };
    for s in sections {
        let Ok(s) = s else {
            o.corrupt += 1;
            continue;
        };
        let target = config.targets.iter().find(|t| t.name == s.target);
        let result = match target {
            Some(t) if super::identity(t) == s.identity => {
                restore_part(&s.target, s.part, config, sources, alerts, now_ms)
            }
            _ => RestoreResult::Mismatch,
        };
        match result {
            RestoreResult::Restored => o.restored += 1,
            RestoreResult::Mismatch => o.mismatch += 1,
            RestoreResult::Corrupt | RestoreResult::Version => o.corrupt += 1,
        }
        if result != RestoreResult::Restored {
            o.affected.insert(s.target);
        }
    }
    o
}

fn restore_part(
    target: &str,
    part: Part,
    config: &Config,
    sources: &Sources,
    alerts: &mut AlertEngine,
    now_ms: i64,
) -> RestoreResult {
    let partial = |(_, dropped): (usize, usize)| {
        if dropped == 0 { RestoreResult::Restored } else { RestoreResult::Mismatch }
    };
    match part {
        Part::Windows(w) => {
            let Some(rt) = sources.targets.iter().find(|rt| rt.config.name == target) else {
                return RestoreResult::Mismatch;
            };
            // Scrapes from the future (the wall clock was set back since): the store would
            // ignore every new scrape until the clock caught up with them.
            if w.newest_ms().is_some_and(|t| t > now_ms.saturating_add(FUTURE_SLACK_MS)) {
                return RestoreResult::Mismatch;
            }
            match w.restore(config.max_window()) {
                Ok(store) => {
                    let mut st = rt.lock();
                    if st.windows.is_empty() {
                        st.windows = store;
                    }
                    RestoreResult::Restored
                }
                Err(_) => RestoreResult::Corrupt,
            }
        }
        Part::Budgets(b) => partial(sources.book.lock().unwrap_or_else(|e| e.into_inner()).restore(target, b)),
        Part::Requests(r) => partial(sources.store.lock().unwrap_or_else(|e| e.into_inner()).restore(target, r)),
        Part::Alerts(a) => {
            // Only alerts of this target: a section cannot speak for another.
            let own = a.into_iter().filter(|a| a.labels.get("target").is_some_and(|t| t == target));
            partial(alerts.restore(own))
        }
    }
}
