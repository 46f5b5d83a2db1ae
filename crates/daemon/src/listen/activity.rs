//! What a listener knows of one of its connections: when it last read or wrote, whether a
//! request is in progress, and how a request body in progress is arriving. The accept loop
//! ([`super::server`]) reads it to pick which connection to close at the cap; the paced
//! body ([`super::paced`]) writes the body's progress into it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// The slowest a request body may arrive on average, in bytes per second: 1 KiB/s, well
/// under any real client's upload and far above a trickle.
pub const MIN_BODY_RATE: u64 = 1024;

/// A body in progress is not lagging before it has been quiet this long.
const LAG_QUIET: Duration = Duration::from_secs(1);

/// No body in progress, in [`Activity::body_since_ms`].
const NO_BODY: u64 = u64::MAX;

/// What the accept loop knows of one connection.
pub struct Activity {
    pub(super) epoch: Instant,
    /// Milliseconds since `epoch` of the last byte read or written.
    pub(super) last_ms: AtomicU64,
    pub(super) in_flight: AtomicUsize,
    pub(super) close: Notify,
    /// When the request body in progress began, or [`NO_BODY`].
    pub(super) body_since_ms: AtomicU64,
    pub(super) body_bytes: AtomicU64,
    pub(super) body_timed_out: AtomicBool,
}

impl Activity {
    pub(super) fn new(epoch: Instant) -> Activity {
        Activity {
            epoch,
            last_ms: AtomicU64::new(epoch.elapsed().as_millis() as u64),
            in_flight: AtomicUsize::new(0),
            close: Notify::new(),
            body_since_ms: AtomicU64::new(NO_BODY),
            body_bytes: AtomicU64::new(0),
            body_timed_out: AtomicBool::new(false),
        }
    }

    pub(super) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub(super) fn touch(&self) {
        self.last_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    pub(super) fn idle_for(&self) -> Duration {
        Duration::from_millis(self.now_ms().saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }

    pub(super) fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) > 0
    }

    pub(super) fn body_started(&self) {
        self.body_bytes.store(0, Ordering::Relaxed);
        self.body_since_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    pub(super) fn body_received(&self, n: u64) {
        self.body_bytes.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn body_ended(&self) {
        self.body_since_ms.store(NO_BODY, Ordering::Relaxed);
    }

    pub(super) fn body_timed_out(&self) {
        self.body_timed_out.store(true, Ordering::Relaxed);
    }

    /// Whether a request body is in progress and lags: quiet for [`LAG_QUIET`], or below
    /// [`MIN_BODY_RATE`] so far. Such a connection is closed for a new one at the cap.
    pub(super) fn body_lags(&self, now_ms: u64) -> bool {
        let since = self.body_since_ms.load(Ordering::Relaxed);
        if since == NO_BODY {
            return false;
        }
        let quiet = now_ms.saturating_sub(self.last_ms.load(Ordering::Relaxed));
        let due = now_ms.saturating_sub(since).saturating_mul(MIN_BODY_RATE) / 1000;
        quiet >= LAG_QUIET.as_millis() as u64 || self.body_bytes.load(Ordering::Relaxed) < due
    }
}
