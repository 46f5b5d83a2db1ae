//! A client's request body under a pace: it must keep arriving. A body with no byte for the
//! listener's body-read timeout, or slower on average than [`MIN_BODY_RATE`] (after the
//! timeout's grace, which each byte received extends as Apache's `mod_reqtimeout` does), is
//! cut with [`BodyError::TimedOut`], so that a client trickling its body cannot hold a
//! connection, and what the handler reserved for it, without end (docs/limits.md).
//!
//! The connection's [`Activity`] learns when a body is in progress and how much of it has
//! arrived: at the cap, a connection whose body lags is closed for a new one before a new
//! one is refused ([`super::server`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::time::{Instant, Sleep};

use super::activity::Activity;
pub use super::activity::MIN_BODY_RATE;

/// Why a client's body failed.
#[derive(Debug)]
pub enum BodyError {
    /// The body did not arrive as HTTP/1.1 frames it (a malformed chunk, a connection
    /// closed before its end).
    Client(hyper::Error),
    /// It stalled, or arrived slower than [`MIN_BODY_RATE`].
    TimedOut(Duration),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Client(e) => write!(f, "the request body is malformed or was cut: {e}"),
            BodyError::TimedOut(t) => write!(
                f,
                "the request body stalled for {t:?} or arrived slower than {MIN_BODY_RATE} bytes/s; it was cut"
            ),
        }
    }
}

impl std::error::Error for BodyError {}

impl BodyError {
    /// The `BodyError` behind an error a body reader passed on, if it is one.
    pub fn find<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a BodyError> {
        let mut at: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(e) = at {
            if let Some(b) = e.downcast_ref::<BodyError>() {
                return Some(b);
            }
            at = e.source();
        }
        None
    }
}

/// A request body as the handlers receive it.
pub struct ClientBody {
    inner: Incoming,
    activity: Arc<Activity>,
    timeout: Duration,
    started: Instant,
    last: Instant,
    received: u64,
    timer: Option<Pin<Box<Sleep>>>,
    done: bool,
}

impl ClientBody {
    pub(super) fn new(inner: Incoming, activity: Arc<Activity>, timeout: Duration) -> ClientBody {
        let now = Instant::now();
        let done = inner.is_end_stream();
        if !done {
            activity.body_started();
        }
        ClientBody { inner, activity, timeout, started: now, last: now, received: 0, timer: None, done }
    }

    /// When the body is cut unless more of it arrives.
    fn deadline(&self) -> Instant {
        let paced = self.started + self.timeout + Duration::from_secs_f64(self.received as f64 / MIN_BODY_RATE as f64);
        paced.min(self.last + self.timeout)
    }

    fn end(&mut self) {
        if !self.done {
            self.done = true;
            self.timer = None;
            self.activity.body_ended();
        }
    }
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    this.received += d.len() as u64;
                    this.last = Instant::now();
                    this.activity.body_received(d.len() as u64);
                }
                if this.inner.is_end_stream() {
                    this.end();
                }
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(Some(Err(e))) => {
                this.end();
                return Poll::Ready(Some(Err(BodyError::Client(e))));
            }
            Poll::Ready(None) => {
                this.end();
                return Poll::Ready(None);
            }
            Poll::Pending => {}
        }
        loop {
            let deadline = this.deadline();
            if Instant::now() >= deadline {
                this.activity.body_timed_out();
                this.end();
                return Poll::Ready(Some(Err(BodyError::TimedOut(this.timeout))));
            }
            match this.timer.as_mut() {
                Some(t) if t.deadline() == deadline => {}
                Some(t) => t.as_mut().reset(deadline),
                None => this.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
            if let Some(t) = this.timer.as_mut()
                && t.as_mut().poll(cx).is_pending()
            {
                return Poll::Pending;
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ClientBody {
    fn drop(&mut self) {
        self.end();
    }
}
