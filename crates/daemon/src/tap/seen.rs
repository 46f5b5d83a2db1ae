//! The records a tap made, kept for tests ([`Seen`], with the `test-hooks` feature): they
//! pair them with an engine's ground truth.

use std::sync::Arc;

use crate::request::RequestRecord;

/// The records a tap made, kept for tests (the inbox itself is drained by the evaluator);
/// at most [`Seen::KEPT`].
#[derive(Debug, Clone, Default)]
pub struct Seen(Arc<std::sync::Mutex<Vec<RequestRecord>>>);

impl Seen {
    pub const KEPT: usize = 100_000;

    pub(super) fn keep(&self, r: &RequestRecord) {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() < Self::KEPT {
            v.push(r.clone());
        }
    }

    /// Every record kept so far, in the order the requests ended.
    pub fn records(&self) -> Vec<RequestRecord> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
