//! Per-target window store: a bounded ring of canonical snapshots with scrape times.
//!
//! INTERFACE STUB: the signatures below are the contract; the implementation lands from
//! the `window` work.

use std::sync::Arc;
use std::time::Duration;

use crate::canonical::Snapshot;

/// The snapshots of one target, oldest first, covering at least the longest window.
#[derive(Debug, Default)]
pub struct TargetWindows {
    _private: (),
}

impl TargetWindows {
    /// A store that keeps what the longest window (`max_window`) needs.
    pub fn new(max_window: Duration) -> Self {
        let _ = max_window;
        TargetWindows { _private: () }
    }

    /// Adds one scrape taken at `t_ms` (Unix milliseconds). Scrapes not newer than the
    /// last one are ignored.
    pub fn push(&mut self, t_ms: i64, snapshot: Arc<Snapshot>) {
        let _ = (t_ms, snapshot);
    }
}
