//! The bounded, coalescing queue of one delivery destination.
//!
//! It holds at most one entry per alert fingerprint: a newer notification for the same alert
//! replaces the older one, so an outage of any length keeps the queue as small as the set of
//! distinct alerts. Entries leave only when a send that carried that exact version succeeded.
//! At capacity, a firing entry is evicted first (the engine re-sends firing alerts every
//! resend interval, so it comes back); a resolution is evicted only when nothing else can be.

use std::collections::BTreeMap;

use crate::alert::state::{Fingerprint, Notification};

#[derive(Debug, Clone)]
struct Entry {
    seq: u64,
    n: Notification,
}

#[derive(Debug, Clone)]
pub struct Queue {
    capacity: usize,
    entries: BTreeMap<Fingerprint, Entry>,
    next_seq: u64,
    evicted_firing: u64,
    evicted_resolved: u64,
}

/// A snapshot of queued notifications; acknowledge it after a successful send.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    pub notifications: Vec<Notification>,
    versions: Vec<(Fingerprint, u64)>,
}

impl Queue {
    pub fn new(capacity: usize) -> Queue {
        Queue {
            capacity: capacity.max(1),
            entries: BTreeMap::new(),
            next_seq: 0,
            evicted_firing: 0,
            evicted_resolved: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// (firing, resolved) notifications evicted because the queue was full.
    pub fn evicted(&self) -> (u64, u64) {
        (self.evicted_firing, self.evicted_resolved)
    }

    pub fn push(&mut self, n: Notification) {
        if !self.entries.contains_key(&n.fingerprint) && self.entries.len() >= self.capacity {
            self.evict_one();
        }
        self.next_seq += 1;
        self.entries.insert(n.fingerprint.clone(), Entry { seq: self.next_seq, n });
    }

    fn evict_one(&mut self) {
        let oldest = |resolved: bool| {
            self.entries
                .iter()
                .filter(|(_, e)| e.n.ends_at_ms.is_some() == resolved)
                .min_by_key(|(_, e)| e.seq)
                .map(|(fp, _)| fp.clone())
        };
        if let Some(fp) = oldest(false) {
            self.entries.remove(&fp);
            self.evicted_firing += 1;
        } else if let Some(fp) = oldest(true) {
            self.entries.remove(&fp);
            self.evicted_resolved += 1;
        }
    }

    /// Up to `max` queued notifications, oldest first.
    pub fn batch(&self, max: usize) -> Batch {
        let mut es: Vec<(&Fingerprint, &Entry)> = self.entries.iter().collect();
        es.sort_by_key(|(_, e)| e.seq);
        es.truncate(max);
        Batch {
            notifications: es.iter().map(|(_, e)| e.n.clone()).collect(),
            versions: es.iter().map(|(fp, e)| ((*fp).clone(), e.seq)).collect(),
        }
    }

    /// Removes what `batch` delivered, unless a newer version arrived meanwhile.
    pub fn ack(&mut self, batch: &Batch) {
        for (fp, seq) in &batch.versions {
            if self.entries.get(fp).is_some_and(|e| e.seq == *seq) {
                self.entries.remove(fp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(fp: &str, resolved: bool) -> Notification {
        Notification {
            fingerprint: Fingerprint(fp.into()),
            labels: Default::default(),
            annotations: Default::default(),
            starts_at_ms: 1,
            ends_at_ms: resolved.then_some(2),
        }
    }

    #[test]
    fn coalesces_per_fingerprint_and_keeps_newer_versions_on_ack() {
        let mut q = Queue::new(10);
        q.push(n("a", false));
        q.push(n("a", false));
        q.push(n("b", false));
        assert_eq!(q.len(), 2);
        let b = q.batch(100);
        q.push(n("a", true)); // resolution arrives while the send is in flight
        q.ack(&b);
        assert_eq!(q.len(), 1);
        let left = q.batch(100);
        assert_eq!(left.notifications[0].fingerprint.0, "a");
        assert_eq!(left.notifications[0].ends_at_ms, Some(2));
    }

    #[test]
    fn full_queue_evicts_firing_before_resolutions() {
        let mut q = Queue::new(2);
        q.push(n("r", true));
        q.push(n("f", false));
        q.push(n("g", false));
        assert_eq!(q.evicted(), (1, 0));
        let fps: Vec<String> = q.batch(10).notifications.into_iter().map(|n| n.fingerprint.0).collect();
        assert_eq!(fps, ["r", "g"]);
        q.push(n("s", true));
        q.push(n("t", true));
        assert_eq!(q.evicted(), (2, 1));
        assert_eq!(q.len(), 2);
    }
}
