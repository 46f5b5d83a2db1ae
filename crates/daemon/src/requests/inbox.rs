//! A bounded, lock-protected queue of finished-request records.
//!
//! Producers run on request-serving tasks and must never wait on the evaluator, so a push
//! takes one short uncontended lock and never blocks on capacity: a full inbox drops.

use std::sync::{Arc, Mutex};

use goodput_core::request::RequestRecord;

/// Cloneable handle shared by every producer and the one consumer.
#[derive(Clone)]
pub struct Inbox {
    inner: Arc<Mutex<State>>,
}

struct State {
    queue: Vec<RequestRecord>,
    capacity: usize,
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
        Inbox { inner: Arc::new(Mutex::new(State { queue: Vec::new(), capacity, accepted: 0, dropped: 0 })) }
    }

    /// Queues one record; returns false (and counts it) when the inbox is full.
    pub fn push(&self, record: RequestRecord) -> bool {
        let mut s = self.lock();
        if s.queue.len() >= s.capacity {
            s.dropped += 1;
            return false;
        }
        s.accepted += 1;
        s.queue.push(record);
        true
    }

    /// Takes every queued record, oldest first.
    pub fn drain(&self) -> Vec<RequestRecord> {
        std::mem::take(&mut self.lock().queue)
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
}
