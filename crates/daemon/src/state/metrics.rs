//! The snapshot's families on /metrics (docs/metrics.md#state-snapshots): what the restore at
//! start found, and whether snapshots are being written. Live counters, rendered per GET as
//! the alert-delivery ones are.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::serve::exposition::{self, Line};

pub const RESTORE: &str = "llm_slo_state_restore_total";
pub const ERRORS: &str = "llm_slo_state_snapshot_errors_total";
pub const LAST: &str = "llm_slo_state_last_snapshot_timestamp_seconds";
pub const BYTES: &str = "llm_slo_state_snapshot_bytes";

pub const FAMILIES: &[(&str, &str, &str)] = &[
    (
        RESTORE,
        "Snapshot sections (one part of one target: windows, budgets, requests, alerts) read at start, by result: restored, mismatch (the target, its URL or engine, an SLO or an alert rule changed: that part starts empty), corrupt (checksum, truncation or decoding failed: starts empty), version (a file of another format, counted once: everything starts empty).",
        "counter",
    ),
    (
        ERRORS,
        "Snapshots that failed, by reason: io (state_dir not writable, disk full; the daemon keeps its state in memory) or too_large (sections left out to keep the file under its bound).",
        "counter",
    ),
    (LAST, "When the last snapshot was written in full, Unix seconds; 0 until one is.", "gauge"),
    (BYTES, "Size of the last snapshot written, bytes.", "gauge"),
];

/// What a restore counts each section as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreResult {
    Restored,
    Mismatch,
    Corrupt,
    Version,
}

impl RestoreResult {
    pub const ALL: [RestoreResult; 4] =
        [RestoreResult::Restored, RestoreResult::Mismatch, RestoreResult::Corrupt, RestoreResult::Version];

    pub fn as_str(self) -> &'static str {
        match self {
            RestoreResult::Restored => "restored",
            RestoreResult::Mismatch => "mismatch",
            RestoreResult::Corrupt => "corrupt",
            RestoreResult::Version => "version",
        }
    }
}

/// Why a snapshot failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotError {
    Io,
    TooLarge,
}

impl SnapshotError {
    pub const ALL: [SnapshotError; 2] = [SnapshotError::Io, SnapshotError::TooLarge];

    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotError::Io => "io",
            SnapshotError::TooLarge => "too_large",
        }
    }
}

/// The counters behind the families.
#[derive(Debug, Default)]
pub struct StateStats {
    restore: [AtomicU64; 4],
    errors: [AtomicU64; 2],
    last_ms: AtomicI64,
    bytes: AtomicU64,
}

impl StateStats {
    pub fn restored(&self, r: RestoreResult, n: u64) {
        self.restore[r as usize].fetch_add(n, Ordering::Relaxed);
    }

    pub fn restore_count(&self, r: RestoreResult) -> u64 {
        self.restore[r as usize].load(Ordering::Relaxed)
    }

    pub fn failed(&self, e: SnapshotError) {
        self.errors[e as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn written(&self, at_ms: i64, bytes: u64) {
        self.last_ms.store(at_ms, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
    }

    /// Appends the families, every series present from the start.
    pub fn render(&self, out: &mut String, external: &[(String, String)]) {
        let mut lines = Vec::new();
        for r in RestoreResult::ALL {
            lines.push(Line {
                name: RESTORE,
                labels: vec![("result", r.as_str())],
                value: self.restore_count(r) as f64,
            });
        }
        for e in SnapshotError::ALL {
            let n = self.errors[e as usize].load(Ordering::Relaxed);
            lines.push(Line { name: ERRORS, labels: vec![("reason", e.as_str())], value: n as f64 });
        }
        let last = self.last_ms.load(Ordering::Relaxed) as f64 / 1000.0;
        lines.push(Line { name: LAST, labels: Vec::new(), value: last });
        lines.push(Line { name: BYTES, labels: Vec::new(), value: self.bytes.load(Ordering::Relaxed) as f64 });
        exposition::write(out, &lines, external, |name| FAMILIES.iter().find(|f| f.0 == name).map(|f| (f.1, f.2)));
    }
}
