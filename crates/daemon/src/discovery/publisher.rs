//! A source's end of its channel: it publishes the source's whole list when it changes,
//! and counts the source's failed reads.

use std::sync::Arc;

use tokio::sync::{Notify, watch};

use super::found::Found;
use super::limits::DiscoveryStats;

/// A source's end of its channel.
pub struct Publisher {
    tx: watch::Sender<Vec<Found>>,
    changed: Arc<Notify>,
    stats: Arc<DiscoveryStats>,
}

impl Publisher {
    /// A publisher and the receiving end of its channel, which starts empty.
    pub(super) fn channel(
        changed: Arc<Notify>,
        stats: Arc<DiscoveryStats>,
    ) -> (Publisher, watch::Receiver<Vec<Found>>) {
        let (tx, found) = watch::channel(Vec::new());
        (Publisher { tx, changed, stats }, found)
    }

    /// Counts `n` failed reads of a source of kind `source` (`llm_slo_discovery_errors_total`).
    pub fn failed(&self, source: &str, n: u64) {
        self.stats.errors_add(source, n);
    }

    /// Publishes `found` if it differs from the list published before.
    pub fn publish(&self, found: Vec<Found>) {
        if self.tx.send_if_modified(|cur| {
            let differs = *cur != found;
            if differs {
                *cur = found;
            }
            differs
        }) {
            self.changed.notify_one();
        }
    }
}
