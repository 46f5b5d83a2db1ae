//! One request's measurement, shared by the two bodies that feed it (the request body as
//! the upstream exchange sends it, the response body as the client's connection relays it)
//! and made harmless: every call into the meter runs under `catch_unwind`, and a meter that
//! panicked is dropped and counted, so a measurement bug can never fail a request.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
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
    pub seen: crate::seen::Seen,
}

impl Ctx {
    /// Now, in the meter's seconds.
    pub fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
}

/// A measurement in progress; it ends (with a record or a count) exactly once.
///
/// What the bodies see on the way is put off until the poll that relayed it returns
/// ([`Measure::later`], [`crate::wakes::after_poll`]), so that parsing an event and
/// keeping the record come after the bytes went on, not between their arrival and their
/// sending. Everything else settles what was put off first, so the meter sees every call
/// in the order it was made.
pub(super) struct Measure {
    slot: Mutex<Slot>,
    /// The request body failed: the client went away while sending it.
    client_gone: AtomicBool,
    ctx: Arc<Ctx>,
}

#[derive(Default)]
struct Slot {
    /// `None` once the measurement has ended.
    meter: Option<Meter>,
    /// What the meter is yet to be told, in the order it happened.
    later: Vec<Later>,
}

/// A call into the meter that can wait until the bytes it is about have gone on.
pub(super) enum Later {
    RequestBody(Bytes),
    RequestEnd,
    /// Response bytes and the meter's time they arrived.
    ResponseBody(Bytes, f64),
    /// The exchange ended, stamped when it did.
    Finish {
        end: End,
        t: f64,
        unix: f64,
    },
}

impl Later {
    /// The exchange's end, stamped now.
    pub fn finish(end: End, ctx: &Ctx) -> Later {
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        Later::Finish { end, t: ctx.now(), unix }
    }
}

impl Measure {
    pub fn new(meter: Meter, ctx: Arc<Ctx>) -> Arc<Measure> {
        let slot = Slot { meter: Some(meter), later: Vec::new() };
        Arc::new(Measure { slot: Mutex::new(slot), client_gone: AtomicBool::new(false), ctx })
    }

    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// The slot, with everything put off told to the meter.
    fn settled(&self) -> MutexGuard<'_, Slot> {
        // The meter runs under catch_unwind, so nothing panics while the lock is held.
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        self.settle(&mut slot);
        slot
    }

    fn settle(&self, slot: &mut Slot) {
        if slot.later.is_empty() {
            return;
        }
        let mut later = std::mem::take(&mut slot.later);
        for op in later.drain(..) {
            self.apply(&mut slot.meter, op);
        }
        slot.later = later;
    }

    fn apply(&self, meter: &mut Option<Meter>, op: Later) {
        match op {
            Later::RequestBody(data) => {
                self.run(meter, |m| m.request_body(&data));
            }
            Later::RequestEnd => {
                self.run(meter, Meter::request_end);
            }
            Later::ResponseBody(data, t) => {
                self.run(meter, |m| m.response_body(&data, t));
            }
            Later::Finish { end, t, unix } => {
                let Some(meter) = meter.take() else { return };
                let faults = meter.faults();
                match catch_unwind(AssertUnwindSafe(|| meter.finish(end, t, unix, &self.ctx.target))) {
                    Ok(record) => {
                        self.ctx.stats.faults(u64::from(faults));
                        #[cfg(feature = "test-hooks")]
                        if crate::seen::keeping() {
                            self.ctx.seen.keep(record.clone());
                        }
                        self.ctx.inbox.push(record);
                    }
                    Err(_) => self.fault(),
                }
            }
        }
    }

    /// Runs `f` on the meter, if it is still measuring; a panic drops the meter and counts.
    fn run<R>(&self, meter: &mut Option<Meter>, f: impl FnOnce(&mut Meter) -> R) -> Option<R> {
        let m = meter.as_mut()?;
        match catch_unwind(AssertUnwindSafe(|| f(m))) {
            Ok(r) => Some(r),
            Err(_) => {
                *meter = None;
                self.fault();
                None
            }
        }
    }

    /// Runs `f` on the meter now, if it is still measuring (after what was put off).
    pub fn with<R>(&self, f: impl FnOnce(&mut Meter) -> R) -> Option<R> {
        let mut slot = self.settled();
        self.run(&mut slot.meter, f)
    }

    /// Tells the meter `op` once the poll in progress on this thread has returned (and
    /// written what it relayed), or now outside one.
    pub fn later(self: &Arc<Self>, op: Later) {
        if !crate::wakes::polling() {
            let mut slot = self.settled();
            return self.apply(&mut slot.meter, op);
        }
        let first = {
            let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
            slot.later.push(op);
            slot.later.len() == 1
        };
        if first {
            crate::wakes::after_poll(self.clone());
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
        self.settled().meter.is_none()
    }

    /// Ends the measurement without a record, counting why.
    pub fn unmeasured(&self, reason: Unmeasured) {
        if let Some(meter) = self.settled().meter.take() {
            self.ctx.stats.faults(u64::from(meter.faults()));
            self.ctx.stats.unmeasured(reason);
        }
    }

    /// Ends the measurement now: the record goes to the inbox (which never blocks; a full
    /// one drops and counts).
    pub fn finish(&self, end: End) {
        let mut slot = self.settled();
        self.apply(&mut slot.meter, Later::finish(end, &self.ctx));
    }
}

impl crate::wakes::AfterPoll for Measure {
    fn after_poll(&self) {
        drop(self.settled());
    }
}

impl Drop for Measure {
    /// What was put off and never settled (a poll that panicked) is told to the meter
    /// with the last owner.
    fn drop(&mut self) {
        let mut slot = std::mem::take(self.slot.get_mut().unwrap_or_else(|e| e.into_inner()));
        self.settle(&mut slot);
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};

    use goodput_core::request::{Route, Status};

    use super::*;

    fn measure() -> (Arc<Measure>, Inbox) {
        let inbox = Inbox::new(16);
        let ctx = Arc::new(Ctx {
            target: "t".into(),
            inbox: inbox.clone(),
            stats: Arc::default(),
            epoch: Instant::now(),
            #[cfg(feature = "test-hooks")]
            seen: Default::default(),
        });
        (Measure::new(Meter::new(Route::ChatCompletions, 0.0), ctx), inbox)
    }

    const BODY: &[u8] = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#;
    const EVENTS: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok\"}}]}\n\ndata: [DONE]\n\n";

    /// One exchange told to the meter the way the bodies tell it, inside one poll.
    struct Exchange {
        m: Arc<Measure>,
        inbox: Inbox,
        /// Records in the inbox when the poll was about to return.
        before_return: Option<usize>,
    }

    impl Future for Exchange {
        type Output = ();

        fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            let m = self.m.clone();
            m.later(Later::RequestBody(Bytes::from_static(BODY)));
            m.later(Later::RequestEnd);
            // Told now, after what was put off: the head is judged with the request read.
            let head = m.with(|meter| meter.response_head(200, Some("text/event-stream"), None));
            assert!(matches!(head, Some(Ok(()))));
            m.later(Later::ResponseBody(Bytes::from_static(EVENTS), 0.25));
            m.later(Later::finish(End::Eof, m.ctx()));
            assert!(!m.slot.lock().expect("slot").later.is_empty(), "the body's bytes wait for the poll's end");
            let queued = self.inbox.drain();
            self.before_return = Some(queued.len());
            Poll::Ready(())
        }
    }

    #[test]
    fn what_the_bodies_see_reaches_the_meter_after_the_poll_in_order() {
        let (m, inbox) = measure();
        let mut poll = Exchange { m: m.clone(), inbox: inbox.clone(), before_return: None };
        let mut f = std::pin::pin!(crate::wakes::in_task(async {
            std::future::poll_fn(|cx| Pin::new(&mut poll).poll(cx)).await
        }));
        assert!(f.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_ready());
        assert_eq!(poll.before_return, Some(0), "no record before the poll returned");
        let records = inbox.drain();
        assert_eq!(records.len(), 1, "the record once the poll returned");
        let r = &records[0];
        assert_eq!((r.model.as_str(), r.status), ("m", Status::Ok));
        assert_eq!(r.ttft_s, Some(0.25));
        assert!(m.ended());
    }

    #[test]
    fn outside_a_poll_the_meter_is_told_at_once() {
        let (m, inbox) = measure();
        m.later(Later::RequestBody(Bytes::from_static(BODY)));
        m.later(Later::RequestEnd);
        assert!(m.slot.lock().expect("slot").later.is_empty());
        m.later(Later::finish(End::ClientAbort, m.ctx()));
        let records = inbox.drain();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].model, "m");
    }

    #[test]
    fn what_was_put_off_and_never_settled_is_told_when_the_measure_goes() {
        let (m, inbox) = measure();
        {
            let mut slot = m.slot.lock().expect("slot");
            slot.later.push(Later::RequestBody(Bytes::from_static(BODY)));
            slot.later.push(Later::finish(End::ClientAbort, m.ctx()));
        }
        drop(m);
        let records = inbox.drain();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].model, "m");
    }
}
