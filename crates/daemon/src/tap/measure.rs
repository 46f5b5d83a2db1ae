//! One request's measurement, shared by the two bodies that feed it (the request body on
//! the upstream connection's task, the response body on the client connection's task) and
//! made harmless: every call into the meter runs under `catch_unwind`, and a meter that
//! panicked is dropped and counted, so a measurement bug can never fail a request.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use goodput_core::request::{End, Meter, Unmeasured};

use super::metrics::TapStats;
use crate::inbox::Inbox;

/// What every measurement of one tap shares.
pub(super) struct Ctx {
    pub target: String,
    pub inbox: Inbox,
    pub stats: Arc<TapStats>,
    /// The zero of the meter's clock: times are seconds since the tap started.
    pub epoch: Instant,
    #[cfg(feature = "test-hooks")]
    pub seen: super::seen::Seen,
}

impl Ctx {
    /// Now, in the meter's seconds.
    pub fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
}

/// A measurement in progress; it ends (with a record or a count) exactly once.
pub(super) struct Measure {
    meter: Mutex<Option<Meter>>,
    /// The request body failed: the client went away while sending it.
    client_gone: AtomicBool,
    ctx: Arc<Ctx>,
}

impl Measure {
    pub fn new(meter: Meter, ctx: Arc<Ctx>) -> Arc<Measure> {
        Arc::new(Measure { meter: Mutex::new(Some(meter)), client_gone: AtomicBool::new(false), ctx })
    }

    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    fn lock(&self) -> MutexGuard<'_, Option<Meter>> {
        // The meter runs under catch_unwind, so nothing panics while the lock is held.
        self.meter.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the meter, if it is still measuring; a panic drops the meter and counts.
    pub fn with<R>(&self, f: impl FnOnce(&mut Meter) -> R) -> Option<R> {
        let mut slot = self.lock();
        let meter = slot.as_mut()?;
        match catch_unwind(AssertUnwindSafe(|| f(meter))) {
            Ok(r) => Some(r),
            Err(_) => {
                *slot = None;
                drop(slot);
                self.fault();
                None
            }
        }
    }

    fn fault(&self) {
        self.ctx.stats.faults(1);
        self.ctx.stats.unmeasured(Unmeasured::Fault);
        tracing::error!(target_name = %self.ctx.target, "the tap's measurement of a request failed; the request was served unmeasured");
    }

    pub fn set_client_gone(&self) {
        self.client_gone.store(true, Ordering::Relaxed);
    }

    pub fn client_gone(&self) -> bool {
        self.client_gone.load(Ordering::Relaxed)
    }

    /// Whether the measurement has ended (recorded, counted unmeasured, or faulted).
    pub fn ended(&self) -> bool {
        self.lock().is_none()
    }

    /// Ends the measurement without a record, counting why.
    pub fn unmeasured(&self, reason: Unmeasured) {
        if let Some(meter) = self.lock().take() {
            self.ctx.stats.faults(u64::from(meter.faults()));
            self.ctx.stats.unmeasured(reason);
        }
    }

    /// Ends the measurement: the record goes to the inbox (which never blocks; a full one
    /// drops and counts).
    pub fn finish(&self, end: End) {
        let Some(meter) = self.lock().take() else { return };
        let t = self.ctx.now();
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let faults = meter.faults();
        match catch_unwind(AssertUnwindSafe(|| meter.finish(end, t, unix, &self.ctx.target))) {
            Ok(record) => {
                self.ctx.stats.faults(u64::from(faults));
                #[cfg(feature = "test-hooks")]
                self.ctx.seen.keep(&record);
                self.ctx.inbox.push(record);
            }
            Err(_) => self.fault(),
        }
    }
}
