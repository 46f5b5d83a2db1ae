//! The daemon's notion of "now", injected so that tests and replay can drive time.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix milliseconds, as scrape timestamps and report instants use them.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> i64;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
    }
}
