//! The bodies the tap relays. Each forwards every frame in the same `poll_frame` call that
//! received it, unchanged (no buffering, no copy: `Bytes` is reference-counted), and hands
//! the meter a look at its bytes once they went on ([`Later`]; docs/request-path.md,
//! "Invisible to clients").
//!
//! How a body ends tells the meter how the exchange ended: the response's end of stream is
//! `Eof`, an error from upstream is `UpstreamReset`, and a response body dropped before its
//! end (hyper drops it when the client's connection fails) is `ClientAbort`.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use goodput_core::request::End;
use goodput_core::request::body::MAX_REQUEST_BODY;
use goodput_core::request::sse::MAX_EVENT_BYTES;
use goodput_core::request::strip::{Forward, UsageStripper};
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::oneshot;

use super::conn::Conn;
use super::measure::{Later, Measure};
use crate::http1::Driven;
use crate::listen::paced::{BodyError, ClientBody};

/// An upstream response's body, driving its connection as the client's connection reads it.
pub(super) type UpstreamBody = Driven<Conn, RequestBody>;

/// How the client's request body failed, if it did: the handler answers the client for
/// it rather than blaming the upstream.
#[derive(Clone, Default)]
pub(super) struct ClientFault(Arc<Mutex<Option<BodyError>>>);

impl ClientFault {
    fn set(&self, e: BodyError) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }

    pub fn is_set(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    pub fn take(&self) -> Option<BodyError> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Why the tap stopped sending a client's body upstream; the upstream request fails with it.
#[derive(Debug)]
pub(super) struct ClientBodyFailed;

impl std::fmt::Display for ClientBodyFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the client's request body failed")
    }
}

impl std::error::Error for ClientBodyFailed {}

/// The request body on its way upstream: a prefix the tap already read (to look into it,
/// or to edit it for `inject_usage`), then the rest as it arrives, teed into the meter.
///
/// It keeps what it sent (the same reference-counted bytes, no copy) while that fits in
/// [`MAX_REQUEST_BODY`], and when it is dropped it hands back what the upstream request
/// left of it ([`Leftover`]): a request whose reused connection failed before any answer
/// can then be sent again whole, and a request that failed can still be read for its model.
pub(super) struct RequestBody {
    prefix: VecDeque<Bytes>,
    rest: Option<ClientBody>,
    /// Where the rest's bytes are teed, until its end.
    tee: Option<Arc<Measure>>,
    fault: ClientFault,
    /// Every frame sent so far; `None` once they pass [`MAX_REQUEST_BODY`] (or a frame was
    /// not data), when the request can no longer be sent again.
    sent: Option<Vec<Bytes>>,
    sent_len: usize,
    back: Option<oneshot::Sender<Leftover>>,
}

/// What an upstream request left of its body when it was dropped.
pub(super) struct Leftover {
    /// Every byte sent so far, when they were kept.
    sent: Option<Vec<Bytes>>,
    prefix: VecDeque<Bytes>,
    rest: Option<ClientBody>,
    tee: Option<Arc<Measure>>,
}

impl Leftover {
    /// Whether every byte sent so far was kept, so that the body can be sent again whole.
    pub fn resendable(&self) -> bool {
        self.sent.is_some()
    }

    /// The whole body once more, from its first byte, when it is [`resendable`](Self::resendable);
    /// the meter is not fed again what it already read.
    pub fn resend(self, fault: ClientFault) -> Option<(RequestBody, oneshot::Receiver<Leftover>)> {
        let mut prefix: VecDeque<Bytes> = self.sent?.into();
        prefix.extend(self.prefix);
        Some(RequestBody::build(prefix, self.rest, self.tee, fault).keep())
    }

    /// Reads what the client had not sent yet into the meter (so that a failed request
    /// still names its model), up to [`MAX_REQUEST_BODY`] and for at most `within`.
    pub async fn read_rest(self, within: std::time::Duration) {
        if self.tee.is_none() {
            return;
        }
        let mut body = RequestBody::build(VecDeque::new(), self.rest, self.tee, ClientFault::default());
        let read = async {
            use http_body_util::BodyExt;
            let mut n = 0;
            while let Some(Ok(frame)) = body.frame().await {
                n += frame.data_ref().map_or(0, Bytes::len);
                if n > MAX_REQUEST_BODY {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(within, read).await;
    }
}

impl RequestBody {
    pub fn new(
        prefix: Option<Bytes>,
        rest: Option<ClientBody>,
        tee: Option<Arc<Measure>>,
        fault: ClientFault,
    ) -> RequestBody {
        RequestBody::build(prefix.into_iter().collect(), rest, tee, fault)
    }

    fn build(
        prefix: VecDeque<Bytes>,
        rest: Option<ClientBody>,
        tee: Option<Arc<Measure>>,
        fault: ClientFault,
    ) -> RequestBody {
        let prefix = prefix.into_iter().filter(|p| !p.is_empty()).collect();
        let mut body = RequestBody { prefix, rest, tee, fault, sent: None, sent_len: 0, back: None };
        if body.rest.as_ref().is_none_or(Body::is_end_stream) {
            body.tee_end();
        }
        body
    }

    /// This body, keeping what it sends; the receiver gets what is left of it once the
    /// upstream request drops it.
    pub fn keep(mut self) -> (RequestBody, oneshot::Receiver<Leftover>) {
        let (tx, rx) = oneshot::channel();
        self.sent = Some(Vec::new());
        self.back = Some(tx);
        (self, rx)
    }

    fn tee_end(&mut self) {
        if let Some(m) = self.tee.take() {
            m.later(Later::RequestEnd);
        }
    }

    fn sending(&mut self, frame: &Frame<Bytes>) {
        let Some(sent) = self.sent.as_mut() else { return };
        match frame.data_ref() {
            Some(d) if self.sent_len + d.len() <= MAX_REQUEST_BODY => {
                self.sent_len += d.len();
                sent.push(d.clone());
            }
            _ => self.sent = None,
        }
    }
}

impl Drop for RequestBody {
    fn drop(&mut self) {
        if let Some(back) = self.back.take() {
            let _ = back.send(Leftover {
                sent: self.sent.take(),
                prefix: std::mem::take(&mut self.prefix),
                rest: self.rest.take(),
                tee: self.tee.take(),
            });
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = ClientBodyFailed;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, ClientBodyFailed>>> {
        let this = self.get_mut();
        if let Some(p) = this.prefix.pop_front() {
            let frame = Frame::data(p);
            this.sending(&frame);
            return Poll::Ready(Some(Ok(frame)));
        }
        let Some(rest) = this.rest.as_mut() else { return Poll::Ready(None) };
        match ready!(Pin::new(&mut *rest).poll_frame(cx)) {
            Some(Ok(frame)) => {
                let at_end = rest.is_end_stream();
                if let (Some(m), Some(data)) = (&this.tee, frame.data_ref()) {
                    m.later(Later::RequestBody(data.clone()));
                }
                if at_end {
                    this.tee_end();
                }
                this.sending(&frame);
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(e)) => {
                if let Some(m) = this.tee.take() {
                    m.set_client_gone();
                }
                this.fault.set(e);
                this.rest = None;
                this.sent = None;
                Poll::Ready(Some(Err(ClientBodyFailed)))
            }
            None => {
                this.tee_end();
                this.rest = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_empty() && self.rest.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let p: u64 = self.prefix.iter().map(|p| p.len() as u64).sum();
        let Some(rest) = &self.rest else { return SizeHint::with_exact(p) };
        let h = rest.size_hint();
        let mut out = SizeHint::new();
        out.set_lower(h.lower() + p);
        if let Some(u) = h.upper() {
            out.set_upper(u + p);
        }
        out
    }
}

/// The upstream's response body on its way to the client.
pub(super) struct ResponseBody {
    inner: UpstreamBody,
    measure: Option<Arc<Measure>>,
    /// With `inject_usage`: removes the usage event the tap caused.
    strip: Option<UsageStripper>,
    /// Bytes given to the stripper and sent on; their difference is what it holds.
    fed: usize,
    sent: usize,
    /// The upstream's error, passed on after the bytes the stripper held.
    failed: Option<hyper::Error>,
    flushed: bool,
    done: bool,
}

impl ResponseBody {
    pub fn new(inner: UpstreamBody, measure: Option<Arc<Measure>>, strip: Option<UsageStripper>) -> ResponseBody {
        ResponseBody { inner, measure, strip, fed: 0, sent: 0, failed: None, flushed: false, done: false }
    }

    fn end(&mut self, end: End) {
        if let Some(m) = self.measure.take() {
            m.later(Later::finish(end, m.ctx()));
        }
    }

    /// What to send for `data`: itself, or what the stripper lets through.
    fn strip(&mut self, data: Bytes, at_end: bool) -> Bytes {
        let Some(s) = self.strip.as_mut() else { return data };
        let out = catch_unwind(AssertUnwindSafe(|| {
            let mut out = match s.feed(&data) {
                Forward::All => data.clone(),
                Forward::Bytes(b) => Bytes::from(b),
            };
            if at_end && s.holding() {
                let mut joined = BytesMut::from(&out[..]);
                joined.extend_from_slice(&s.finish());
                out = joined.freeze();
            }
            out
        }));
        match out {
            Ok(out) => {
                self.fed += data.len();
                self.sent += out.len();
                if self.fed - self.sent <= MAX_EVENT_BYTES {
                    return out;
                }
                // An event longer than the meter reads is no usage event (those are a few
                // hundred bytes): from here on the stream passes unmodified, and what was
                // held goes first, so memory stays bounded and no byte is lost.
                let held = self.stop_stripping();
                let mut joined = BytesMut::with_capacity(out.len() + held.len());
                joined.extend_from_slice(&out);
                joined.extend_from_slice(&held);
                joined.freeze()
            }
            Err(_) => {
                // A bug in the stripper must not cost the client bytes: send what it held
                // and this piece, and stop stripping.
                let held = self.stop_stripping();
                if let Some(m) = &self.measure {
                    m.ctx().stats.faults(1);
                }
                tracing::error!("the tap's usage-event stripper failed; the stream continues unstripped");
                let mut joined = BytesMut::from(&held[..]);
                joined.extend_from_slice(&data);
                joined.freeze()
            }
        }
    }

    /// Ends stripping; returns the bytes the stripper held.
    fn stop_stripping(&mut self) -> Bytes {
        let Some(mut s) = self.strip.take() else { return Bytes::new() };
        Bytes::from(catch_unwind(AssertUnwindSafe(|| s.finish())).unwrap_or_default())
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        if this.failed.is_some() {
            // One turn for the server to flush the held bytes before the error aborts the
            // connection (it flushes while a body is pending).
            if !this.flushed {
                this.flushed = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            return Poll::Ready(this.failed.take().map(Err));
        }
        if this.done {
            return Poll::Ready(None);
        }
        loop {
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    let at_end = this.inner.is_end_stream();
                    let frame = match frame.into_data() {
                        Ok(data) => {
                            if let Some(m) = &this.measure {
                                m.later(Later::ResponseBody(data.clone(), m.ctx().now()));
                            }
                            let data = this.strip(data, at_end);
                            if at_end {
                                this.done = true;
                                this.end(End::Eof);
                            }
                            if data.is_empty() {
                                // An empty chunk would end a chunked body early; wait for more.
                                if at_end {
                                    return Poll::Ready(None);
                                }
                                continue;
                            }
                            Frame::data(data)
                        }
                        Err(trailers) => trailers,
                    };
                    return Poll::Ready(Some(Ok(frame)));
                }
                Some(Err(e)) => {
                    this.done = true;
                    this.end(End::UpstreamReset);
                    // The bytes held of the event the upstream broke off in go first: the
                    // client sees the same cut it would have without the tap.
                    let held = this.stop_stripping();
                    if held.is_empty() {
                        return Poll::Ready(Some(Err(e)));
                    }
                    this.failed = Some(e);
                    return Poll::Ready(Some(Ok(Frame::data(held))));
                }
                None => {
                    this.done = true;
                    this.end(End::Eof);
                    let tail = this.stop_stripping();
                    if tail.is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(tail))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed.is_none()
            && (self.done || (self.inner.is_end_stream() && self.strip.as_ref().is_none_or(|s| !s.holding())))
    }

    fn size_hint(&self) -> SizeHint {
        if self.strip.is_some() { SizeHint::default() } else { self.inner.size_hint() }
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        let end = if self.done || self.inner.is_end_stream() { End::Eof } else { End::ClientAbort };
        self.end(end);
    }
}

/// What the tap answers a client with: the upstream's body, or one of its own.
// One per response, made once and polled in place: boxing the upstream's body would add
// an allocation to every request for the rare answer of the tap's own.
#[allow(clippy::large_enum_variant)]
pub(super) enum TapBody {
    Upstream(ResponseBody),
    Own(Option<Bytes>),
}

impl TapBody {
    pub fn own(text: impl Into<Bytes>) -> TapBody {
        TapBody::Own(Some(text.into()))
    }
}

impl Body for TapBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            TapBody::Upstream(b) => Pin::new(b).poll_frame(cx),
            TapBody::Own(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            TapBody::Upstream(b) => b.is_end_stream(),
            TapBody::Own(b) => b.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            TapBody::Upstream(b) => b.size_hint(),
            TapBody::Own(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}
