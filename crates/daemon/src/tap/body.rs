//! The bodies the tap relays. Each forwards every frame in the same `poll_frame` call that
//! received it, unchanged (no buffering, no copy: `Bytes` is reference-counted), and hands
//! the meter a look at its bytes on the way (docs/request-path.md, "Invisible to clients").
//!
//! How a body ends tells the meter how the exchange ended: the response's end of stream is
//! `Eof`, an error from upstream is `UpstreamReset`, and a response body dropped before its
//! end (hyper drops it when the client's connection fails) is `ClientAbort`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use goodput_core::request::End;
use goodput_core::request::strip::{Forward, UsageStripper};
use hyper::body::{Body, Frame, Incoming, SizeHint};

use super::measure::Measure;

/// The request body on its way upstream: a prefix the tap already read (to look into it,
/// or to edit it for `inject_usage`), then the rest as it arrives, teed into the meter.
pub(super) struct RequestBody {
    prefix: Option<Bytes>,
    rest: Option<Incoming>,
    /// Where the rest's bytes are teed, until its end.
    tee: Option<Arc<Measure>>,
}

impl RequestBody {
    pub fn new(prefix: Option<Bytes>, rest: Option<Incoming>, tee: Option<Arc<Measure>>) -> RequestBody {
        let mut body = RequestBody { prefix: prefix.filter(|p| !p.is_empty()), rest, tee };
        if body.rest.as_ref().is_none_or(Body::is_end_stream) {
            body.tee_end();
        }
        body
    }

    fn tee_end(&mut self) {
        if let Some(m) = self.tee.take() {
            m.with(|meter| meter.request_end());
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        if let Some(p) = this.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(p))));
        }
        let Some(rest) = this.rest.as_mut() else { return Poll::Ready(None) };
        match ready!(Pin::new(&mut *rest).poll_frame(cx)) {
            Some(Ok(frame)) => {
                let at_end = rest.is_end_stream();
                if let (Some(m), Some(data)) = (&this.tee, frame.data_ref()) {
                    m.with(|meter| meter.request_body(data));
                }
                if at_end {
                    this.tee_end();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(e)) => {
                if let Some(m) = this.tee.take() {
                    m.set_client_gone();
                }
                this.rest = None;
                Poll::Ready(Some(Err(e)))
            }
            None => {
                this.tee_end();
                this.rest = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_none() && self.rest.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let p = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
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
    inner: Incoming,
    measure: Option<Arc<Measure>>,
    /// With `inject_usage`: removes the usage event the tap caused.
    strip: Option<UsageStripper>,
    done: bool,
}

impl ResponseBody {
    pub fn new(inner: Incoming, measure: Option<Arc<Measure>>, strip: Option<UsageStripper>) -> ResponseBody {
        ResponseBody { inner, measure, strip, done: false }
    }

    fn end(&mut self, end: End) {
        if let Some(m) = self.measure.take() {
            m.finish(end);
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
            Ok(out) => out,
            Err(_) => {
                // A bug in the stripper must not cost the client bytes: send what it held
                // and this piece, and stop stripping.
                let held = catch_unwind(AssertUnwindSafe(|| s.finish())).unwrap_or_default();
                self.strip = None;
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
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
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
                                let t = m.ctx().now();
                                m.with(|meter| meter.response_body(&data, t));
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
                    return Poll::Ready(Some(Err(e)));
                }
                None => {
                    this.done = true;
                    this.end(End::Eof);
                    let tail = this.strip.as_mut().map(UsageStripper::finish).unwrap_or_default();
                    if tail.is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(tail)))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || (self.inner.is_end_stream() && self.strip.as_ref().is_none_or(|s| !s.holding()))
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
