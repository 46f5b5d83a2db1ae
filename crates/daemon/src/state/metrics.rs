//! The snapshot's families on /metrics (docs/metrics.md#state-snapshots): what the restore at
//! start found, and whether snapshots are being written. Live counters, rendered per GET as
//! the alert-delivery ones are.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use goodput_core::export::{Collector, Emit, Family, LabelValue, Labels, NoLabels, Unit};

pub const RESTORE: &str = "llm_slo_state_restore_total";
pub const ERRORS: &str = "llm_slo_state_snapshot_errors_total";
pub const LAST: &str = "llm_slo_state_last_snapshot_timestamp_seconds";
pub const BYTES: &str = "llm_slo_state_snapshot_bytes";

goodput_core::label_set! {
    /// `part="file"` takes its own results (not_a_snapshot, truncated, version, corrupt).
    pub PartResult = [part: RestorePart, result: RestoreResult];
    pub ErrorReason = [reason: SnapshotError];
}

/// Every family, in output order.
pub const FAMILIES: &[Family] = &[
    Family::counter::<PartResult>(
        RESTORE,
        Unit::Count,
        "What the restore at start did with the snapshot. Sections (one part of one target) by part (windows, budgets, requests, alerts, capacity, evaluation (the windows' incremental state: without it the first tick reads the store); unknown for a damaged section of a file that does not list its sections) and result: restored, mismatch (the target, its URL or engine, an SLO or an alert rule changed, or scrapes from the future: that part starts empty), corrupt (checksum or decoding failed), truncated (the file ends inside or before the section), left_out (the snapshot was written without it, past state_max_size). The file as a whole, part=file, counted once: not_a_snapshot, truncated (inside its header), version (another format), corrupt (it could not be read); then everything starts empty.",
    ),
    Family::counter::<ErrorReason>(
        ERRORS,
        Unit::Count,
        "Snapshots that failed, by reason: io (state_dir not writable, disk full; the daemon keeps its state in memory) or too_large (sections left out to keep the file under its bound).",
    ),
    Family::gauge::<NoLabels>(
        LAST,
        Unit::Timestamp,
        "When the last snapshot was written in full, Unix seconds; 0 until one is.",
    ),
    Family::gauge::<NoLabels>(BYTES, Unit::Bytes, "Size of the last snapshot written, bytes."),
];

/// The part of a target a restored or discarded section held; `File` for the file as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RestorePart {
    Windows,
    Budgets,
    Requests,
    Alerts,
    Capacity,
    /// The incremental state of a target's windows.
    Evaluation,
    /// A damaged section of a file that does not say what it held.
    Unknown,
    File,
}

impl RestorePart {
    pub const ALL: [RestorePart; 8] = [
        RestorePart::Windows,
        RestorePart::Budgets,
        RestorePart::Requests,
        RestorePart::Alerts,
        RestorePart::Capacity,
        RestorePart::Evaluation,
        RestorePart::Unknown,
        RestorePart::File,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RestorePart::Windows => "windows",
            RestorePart::Budgets => "budgets",
            RestorePart::Requests => "requests",
            RestorePart::Alerts => "alerts",
            RestorePart::Capacity => "capacity",
            RestorePart::Evaluation => "evaluation",
            RestorePart::Unknown => "unknown",
            RestorePart::File => "file",
        }
    }

    /// The part a section's [`crate::state::format::Part::name`] names.
    pub fn named(name: &str) -> RestorePart {
        RestorePart::ALL
            .into_iter()
            .find(|p| p.as_str() == name && *p != RestorePart::File)
            .unwrap_or(RestorePart::Unknown)
    }

    /// The results this part is counted with.
    fn results(self) -> &'static [RestoreResult] {
        use RestoreResult::*;
        match self {
            RestorePart::File => &[NotASnapshot, Truncated, Version, Corrupt],
            _ => &[Restored, Mismatch, Corrupt, Truncated, LeftOut],
        }
    }
}

impl LabelValue for RestorePart {
    const ALL: &'static [RestorePart] = &RestorePart::ALL;
    fn as_str(self) -> &'static str {
        RestorePart::as_str(self)
    }
}

/// What a restore counts each section (or the file) as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RestoreResult {
    Restored,
    Mismatch,
    Corrupt,
    Truncated,
    LeftOut,
    Version,
    NotASnapshot,
}

impl LabelValue for RestoreResult {
    const ALL: &'static [RestoreResult] = &[
        RestoreResult::Restored,
        RestoreResult::Mismatch,
        RestoreResult::Corrupt,
        RestoreResult::Truncated,
        RestoreResult::LeftOut,
        RestoreResult::NotASnapshot,
        RestoreResult::Version,
    ];
    fn as_str(self) -> &'static str {
        RestoreResult::as_str(self)
    }
}

impl RestoreResult {
    pub fn as_str(self) -> &'static str {
        match self {
            RestoreResult::Restored => "restored",
            RestoreResult::Mismatch => "mismatch",
            RestoreResult::Corrupt => "corrupt",
            RestoreResult::Truncated => "truncated",
            RestoreResult::LeftOut => "left_out",
            RestoreResult::Version => "version",
            RestoreResult::NotASnapshot => "not_a_snapshot",
        }
    }
}

/// Why a snapshot failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotError {
    Io,
    TooLarge,
}

impl LabelValue for SnapshotError {
    const ALL: &'static [SnapshotError] = &SnapshotError::ALL;
    fn as_str(self) -> &'static str {
        SnapshotError::as_str(self)
    }
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
    restore: Mutex<BTreeMap<(RestorePart, RestoreResult), u64>>,
    errors: [AtomicU64; 2],
    last_ms: AtomicI64,
    bytes: AtomicU64,
}

impl StateStats {
    pub fn restored(&self, part: RestorePart, r: RestoreResult, n: u64) {
        *self.restore.lock().unwrap_or_else(|e| e.into_inner()).entry((part, r)).or_default() += n;
    }

    pub fn restore_count(&self, part: RestorePart, r: RestoreResult) -> u64 {
        self.restore.lock().unwrap_or_else(|e| e.into_inner()).get(&(part, r)).copied().unwrap_or(0)
    }

    pub fn failed(&self, e: SnapshotError) {
        self.errors[e as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn written(&self, at_ms: i64, bytes: u64) {
        self.last_ms.store(at_ms, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
    }
}

/// The snapshot's counters, read at each GET of /metrics, every series present from the start.
impl Collector for StateStats {
    fn families(&self) -> &'static [Family] {
        FAMILIES
    }

    fn collect(&self, out: &mut dyn Emit) {
        for part in RestorePart::ALL {
            for &r in part.results() {
                let labels = [("part", part.as_str()), ("result", r.as_str())];
                out.sample(RESTORE, Labels::new(&labels, &[]), self.restore_count(part, r) as f64);
            }
        }
        for e in SnapshotError::ALL {
            let n = self.errors[e as usize].load(Ordering::Relaxed);
            out.sample(ERRORS, Labels::new(&[("reason", e.as_str())], &[]), n as f64);
        }
        let last = self.last_ms.load(Ordering::Relaxed) as f64 / 1000.0;
        out.sample(LAST, Labels::new(&[], &[]), last);
        out.sample(BYTES, Labels::new(&[], &[]), self.bytes.load(Ordering::Relaxed) as f64);
    }
}
