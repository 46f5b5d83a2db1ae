//! The records the taps and the OTLP receiver made, kept for in-process tests (the
//! `test-hooks` feature): they pair them with an engine's ground truth.
//!
//! Nothing is kept until a test asks for it ([`keep_records`]): `cargo bench` builds the
//! `goodput` binary with the features of the package's dev-dependencies, this one among
//! them, and a binary that kept a copy of every record would do more per request than the
//! release build it stands in for (docs/benchmarks.md#the-tap).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::request::RequestRecord;

static KEEP: AtomicBool = AtomicBool::new(false);

/// Has every tap and OTLP receiver in this process keep each record it makes from now on,
/// for [`Seen::records`]. A test calls it before the traffic it reads back.
pub fn keep_records() {
    KEEP.store(true, Ordering::Relaxed);
}

/// Whether records are being kept ([`keep_records`]).
pub fn keeping() -> bool {
    KEEP.load(Ordering::Relaxed)
}

/// The records one tap or receiver made (the inbox itself is drained by the evaluator); at
/// most [`Seen::KEPT`].
#[derive(Debug, Clone, Default)]
pub struct Seen(Arc<Mutex<Vec<RequestRecord>>>);

impl Seen {
    pub const KEPT: usize = 100_000;

    /// Keeps `r`, when records are being kept.
    pub fn keep(&self, r: RequestRecord) {
        if !keeping() {
            return;
        }
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() < Self::KEPT {
            v.push(r);
        }
    }

    /// Every record kept so far, in the order they were made.
    pub fn records(&self) -> Vec<RequestRecord> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use goodput_core::request::{End, Meter, Route};

    use super::*;

    #[test]
    fn nothing_is_kept_until_a_test_asks_then_every_record_is() {
        let record = || Meter::new(Route::ChatCompletions, 0.0).finish(End::ClientAbort, 1.0, 1.0e9, "t");
        let seen = Seen::default();
        // No other test of this crate asks for records, so none has yet.
        assert!(!keeping());
        seen.keep(record());
        assert!(seen.records().is_empty(), "a binary that never asks keeps nothing");
        keep_records();
        seen.keep(record());
        seen.keep(record());
        assert_eq!(seen.records().len(), 2);
    }
}
