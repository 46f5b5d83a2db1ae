//! Where the request path's records meet the evaluation loop: a bounded, lock-protected
//! queue of finished-request records.
//!
//! The tap and the OTLP receiver push [`RequestRecord`]s into one bounded [`Inbox`]; the
//! evaluator drains it once per tick into the pure request store. A flood cannot grow the
//! inbox without limit: past its capacity records are dropped and counted, and the count is
//! exported, so a gap in the exact numbers is visible rather than silent.
//!
//! Producers run on request-serving tasks and must never wait on the evaluator, so a push
//! takes one short uncontended lock and never blocks on capacity: a full inbox drops.
//! Full means either limit: a number of records, or their bytes, since a tap record
//! carries one ITL gap per token event and a count alone would not bound memory.

use std::sync::{Arc, Mutex};

pub use goodput_core::request::RequestRecord;

/// Cloneable handle shared by every producer and the one consumer.
#[derive(Clone)]
pub struct Inbox {
    inner: Arc<Mutex<State>>,
}

struct State {
    queue: Vec<RequestRecord>,
    capacity: usize,
    /// The queued records' [`record_bytes`], and the most they may add up to.
    bytes: usize,
    max_bytes: usize,
    accepted: u64,
    dropped: u64,
}

/// Lifetime totals, for the inbox's own metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InboxStats {
    pub accepted: u64,
    pub dropped: u64,
}

impl Inbox {
    /// An inbox holding at most `capacity` records between two drains.
    pub fn new(capacity: usize) -> Inbox {
        Inbox::with_limits(capacity, DEFAULT_MAX_BYTES)
    }

    /// An inbox holding at most `capacity` records and `max_bytes` of them between drains.
    pub fn with_limits(capacity: usize, max_bytes: usize) -> Inbox {
        let state = State { queue: Vec::new(), capacity, bytes: 0, max_bytes, accepted: 0, dropped: 0 };
        Inbox { inner: Arc::new(Mutex::new(state)) }
    }

    /// Queues one record; returns false (and counts it) when the inbox is full.
    pub fn push(&self, record: RequestRecord) -> bool {
        let size = record_bytes(&record);
        let mut s = self.lock();
        if s.queue.len() >= s.capacity || s.bytes + size > s.max_bytes {
            s.dropped += 1;
            return false;
        }
        s.accepted += 1;
        s.bytes += size;
        s.queue.push(record);
        true
    }

    /// Takes every queued record, oldest first.
    pub fn drain(&self) -> Vec<RequestRecord> {
        let mut s = self.lock();
        s.bytes = 0;
        std::mem::take(&mut s.queue)
    }

    pub fn stats(&self) -> InboxStats {
        let s = self.lock();
        InboxStats { accepted: s.accepted, dropped: s.dropped }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A producer that panicked mid-push left a valid Vec behind; keep going.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The most bytes of records held between two drains by default (docs/limits.md#request-store):
/// 65,536 ordinary records fit; a flood of long streams is cut here, not at the count.
pub const DEFAULT_MAX_BYTES: usize = 64 << 20;

/// What one record holds in memory: the struct, its strings and its ITL gaps.
pub fn record_bytes(r: &RequestRecord) -> usize {
    std::mem::size_of::<RequestRecord>()
        + r.target.len()
        + r.model.len()
        + r.itl.len() * std::mem::size_of::<goodput_core::request::ItlGap>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::request::{Source, Status};

    fn record(i: u32) -> RequestRecord {
        RequestRecord {
            source: Source::Tap,
            target: "t".into(),
            model: "m".into(),
            status: Status::Ok,
            finished_unix: f64::from(i),
            e2e_s: 1.0,
            ttft_s: Some(0.1),
            tpot_s: None,
            prompt_tokens: None,
            output_tokens: None,
            itl: Vec::new(),
            engine: None,
            request_id: None,
        }
    }

    #[test]
    fn a_full_inbox_drops_and_counts_and_drain_empties_it() {
        let inbox = Inbox::new(2);
        assert!(inbox.push(record(1)));
        assert!(inbox.clone().push(record(2)));
        assert!(!inbox.push(record(3)));
        assert_eq!(inbox.stats(), InboxStats { accepted: 2, dropped: 1 });
        let got: Vec<f64> = inbox.drain().iter().map(|r| r.finished_unix).collect();
        assert_eq!(got, vec![1.0, 2.0]);
        assert!(inbox.drain().is_empty());
        assert!(inbox.push(record(4)));
    }

    #[test]
    fn records_with_many_itl_gaps_are_bounded_by_bytes_not_only_by_count() {
        let mut long = record(1);
        long.itl = vec![goodput_core::request::ItlGap { seconds: 0.01, tokens: 1 }; 10_000];
        let size = record_bytes(&long);
        assert!(size > 10_000 * 16);
        let inbox = Inbox::with_limits(1_000, 3 * size + 1_000);
        for _ in 0..3 {
            assert!(inbox.push(long.clone()));
        }
        assert!(!inbox.push(long.clone()), "a fourth long record passes the byte limit");
        assert!(inbox.push(record(2)), "a short one still fits");
        assert_eq!(inbox.stats(), InboxStats { accepted: 4, dropped: 1 });
        assert_eq!(inbox.drain().len(), 4);
        assert!(inbox.push(long), "draining frees the bytes");
    }
}
