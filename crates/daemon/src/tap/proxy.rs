//! One request through the tap: forward it upstream as the client sent it (less the
//! hop-by-hop headers a proxy must drop), relay the response the same way, and measure the
//! generation routes on the way (docs/request-path.md).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use goodput_core::request::body::{MAX_REQUEST_BODY, inject_include_usage};
use goodput_core::request::strip::UsageStripper;
use goodput_core::request::{End, Meter, Route, Unmeasured};
use http_body_util::BodyExt;
use hyper::body::Body;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use tokio::sync::oneshot;

use super::body::{ClientFault, Leftover, RequestBody, ResponseBody, TapBody, UpstreamBody};
use super::conn::{Failed, Upstream};
use super::headers::{is_upgrade, remove_hop_by_hop};
use super::measure::{Ctx, Measure};
use crate::listen::paced::{BodyError, ClientBody};
use crate::listen::server::Held;

/// Everything a request handler needs; one per tap.
pub(super) struct Proxy {
    pub upstream: Upstream,
    /// `scheme://authority` of the upstream.
    pub origin: String,
    /// The upstream URL's path without its trailing slash ("" for the root).
    pub prefix: String,
    pub inject_usage: bool,
    pub ctx: Arc<Ctx>,
}

impl Proxy {
    pub async fn handle(self: Arc<Self>, req: Request<ClientBody>) -> Result<Response<TapBody>, Infallible> {
        let t_req = self.ctx.now();
        let route = Route::classify(req.method().as_str(), req.uri().path());
        let upgrade = is_upgrade(req.headers());
        let measure = match route {
            Some(r) if !upgrade => Some(Measure::new(Meter::new(r, t_req), self.ctx.clone())),
            _ => {
                self.ctx.stats.unmeasured(if upgrade { Unmeasured::Upgrade } else { Unmeasured::Route });
                None
            }
        };
        let mut req = req;
        let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
        let held = req.extensions().get::<Held>().cloned();
        let (mut parts, incoming) = req.into_parts();
        let uri = match self.upstream_uri(&parts.uri) {
            Ok(u) => u,
            Err(e) => return Ok(own(StatusCode::BAD_REQUEST, format!("goodput tap: cannot forward this path: {e}\n"))),
        };
        parts.uri = uri;
        parts.version = hyper::Version::HTTP_11;
        remove_hop_by_hop(&mut parts.headers, upgrade);

        let inject = self.inject_usage && route.is_some_and(Route::is_openai) && measure.is_some();
        let fault = ClientFault::default();
        let (body, injected) = match (inject, &measure) {
            (true, Some(m)) => match read_for_inject(incoming, &mut parts.headers, m, &fault).await {
                Ok(b) => b,
                Err(e) => {
                    m.finish(End::ClientAbort);
                    return Ok(client_fault(&e));
                }
            },
            _ => (RequestBody::new(None, Some(incoming), measure.clone(), fault.clone()), false),
        };

        let head = (!upgrade).then(|| Head::of(&parts));
        let (body, left) = body.keep();
        let resp = match self.upstream.send(Request::from_parts(parts, body), upgrade).await {
            Ok(r) => r,
            Err(failed) => match self.after_failure(failed, head, left, &fault, measure.as_ref()).await {
                Ok(r) => r,
                Err(answer) => return Ok(answer),
            },
        };
        let mut resp = resp;
        if resp.status() == StatusCode::SWITCHING_PROTOCOLS
            && let Some(client_side) = client_upgrade
        {
            let upstream_side = hyper::upgrade::on(&mut resp);
            // The relay keeps the connection's place under the tap's cap while it runs.
            let hold = held.map(|h| h.hold());
            tokio::spawn(async move {
                relay_upgraded(client_side, upstream_side).await;
                drop(hold);
            });
            let (mut parts, _) = resp.into_parts();
            remove_hop_by_hop(&mut parts.headers, true);
            return Ok(Response::from_parts(parts, TapBody::Own(None)));
        }
        let (mut parts, incoming) = resp.into_parts();
        let mut strip = None;
        if let Some(m) = &measure {
            let head = |name| parts.headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
            let (ctype, encoding) = (head(header::CONTENT_TYPE), head(header::CONTENT_ENCODING));
            match m.with(|meter| meter.response_head(parts.status.as_u16(), ctype, encoding)) {
                Some(Err(reason)) => m.unmeasured(reason),
                Some(Ok(())) if injected && parts.status.is_success() && is_event_stream(ctype) => {
                    strip = Some(UsageStripper::new());
                    parts.headers.remove(header::CONTENT_LENGTH);
                }
                _ => {}
            }
        }
        remove_hop_by_hop(&mut parts.headers, false);
        let measure = measure.filter(|m| !m.ended());
        Ok(Response::from_parts(parts, TapBody::Upstream(ResponseBody::new(incoming, measure, strip))))
    }

    /// The upstream request failed before any answer (no byte went to the client). On a
    /// connection the pool reused, with every byte of the body at hand, it is sent once more
    /// on a fresh connection, as Envoy and nginx do: the peer closing an idle keep-alive
    /// connection as the request went out says nothing about the request. Otherwise, or when
    /// that fails too, the client gets a 502 (or 400/408 for its own body), and the record
    /// keeps the model its body names, reading the body for it if it was not sent.
    async fn after_failure(
        &self,
        failed: Failed,
        head: Option<Head>,
        left: oneshot::Receiver<Leftover>,
        fault: &ClientFault,
        measure: Option<&Arc<Measure>>,
    ) -> Result<Response<UpstreamBody>, Response<TapBody>> {
        let Failed { mut error, reused_unanswered: reused } = failed;
        let mut left = leftover(left).await;
        let gone = || fault_or_gone(fault, measure);
        if reused
            && !gone()
            && let Some(head) = head
            && left.as_ref().is_some_and(Leftover::resendable)
            && let Some((body, again)) = left.take().and_then(|l| l.resend(fault.clone()))
        {
            self.ctx.stats.retried();
            tracing::debug!(target_name = %self.ctx.target, %error, "tap: a reused upstream connection failed before any answer; sending the request again on a fresh one");
            match self.upstream.send_fresh(head.request(body), false).await {
                Ok(r) => return Ok(r),
                Err(e) => {
                    error = e.error;
                    left = leftover(again).await;
                }
            }
        }
        // The client's own body failed: its fault, answered as such, and no other client's
        // business.
        if let Some(why) = fault.take() {
            if let Some(m) = measure {
                m.finish(End::ClientAbort);
            }
            return Err(client_fault(&why));
        }
        if let Some(m) = measure {
            if let Some(l) = left {
                l.read_rest(READ_REST_WITHIN).await;
            }
            m.finish(if m.client_gone() { End::ClientAbort } else { End::UpstreamReset });
        }
        tracing::debug!(target_name = %self.ctx.target, %error, "tap: upstream request failed");
        Err(own(StatusCode::BAD_GATEWAY, format!("goodput tap: cannot reach the upstream {}: {error}\n", self.origin)))
    }

    /// The upstream URI for a request's path and query.
    fn upstream_uri(&self, uri: &Uri) -> Result<Uri, hyper::http::uri::InvalidUri> {
        let pq = uri.path_and_query().map_or("/", |p| p.as_str());
        Uri::try_from(format!("{}{}{pq}", self.origin, self.prefix))
    }
}

/// How long a failed upstream request may take to hand back its body.
const LEFTOVER_WITHIN: Duration = Duration::from_secs(1);
/// How long a failed request's body is read for its model before the 502.
const READ_REST_WITHIN: Duration = Duration::from_secs(1);

/// What the upstream request left of its body, once its connection lets go of it.
async fn leftover(rx: oneshot::Receiver<Leftover>) -> Option<Leftover> {
    tokio::time::timeout(LEFTOVER_WITHIN, rx).await.ok().and_then(Result::ok)
}

/// Whether the client's body failed or the client went away.
fn fault_or_gone(fault: &ClientFault, measure: Option<&Arc<Measure>>) -> bool {
    fault.is_set() || measure.is_some_and(|m| m.client_gone())
}

/// A request's head as forwarded, to send it again.
struct Head {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
}

impl Head {
    fn of(parts: &hyper::http::request::Parts) -> Head {
        Head { method: parts.method.clone(), uri: parts.uri.clone(), headers: parts.headers.clone() }
    }

    fn request<B>(self, body: B) -> Request<B> {
        let mut r = Request::new(body);
        *r.method_mut() = self.method;
        *r.uri_mut() = self.uri;
        *r.version_mut() = hyper::Version::HTTP_11;
        *r.headers_mut() = self.headers;
        r
    }
}

fn own(status: StatusCode, text: impl Into<Bytes>) -> Response<TapBody> {
    let mut r = Response::new(TapBody::own(text));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// The answer to a request whose body failed on the client's side: 408 when it stalled or
/// trickled, 400 when it was malformed. The connection is closed after it, since the rest
/// of that body cannot be told from a next request.
fn client_fault(why: &BodyError) -> Response<TapBody> {
    let status = match why {
        BodyError::TimedOut(_) => StatusCode::REQUEST_TIMEOUT,
        BodyError::Client(_) => StatusCode::BAD_REQUEST,
    };
    let mut r = own(status, format!("goodput tap: {why}\n"));
    r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

fn is_event_stream(ctype: Option<&str>) -> bool {
    ctype.and_then(|c| c.split(';').next()).is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
}

/// Reads a request body of up to [`MAX_REQUEST_BODY`] to add `include_usage` to it. Past
/// the cap (or with a longer Content-Length) what was read is sent on unchanged, followed by
/// the rest. `Err` when the client's body fails.
async fn read_for_inject(
    mut incoming: ClientBody,
    headers: &mut HeaderMap,
    m: &Arc<Measure>,
    fault: &ClientFault,
) -> Result<(RequestBody, bool), BodyError> {
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_REQUEST_BODY as u64) {
        return Ok((RequestBody::new(None, Some(incoming), Some(m.clone()), fault.clone()), false));
    }
    let mut buf = BytesMut::new();
    while !incoming.is_end_stream() {
        let Some(frame) = incoming.frame().await else { break };
        let frame = frame.inspect_err(|_| m.set_client_gone())?;
        let Ok(data) = frame.into_data() else { continue };
        buf.extend_from_slice(&data);
        if buf.len() > MAX_REQUEST_BODY {
            m.with(|meter| meter.request_body(&buf));
            let rest = RequestBody::new(Some(buf.freeze()), Some(incoming), Some(m.clone()), fault.clone());
            return Ok((rest, false));
        }
    }
    m.with(|meter| {
        meter.request_body(&buf);
        meter.request_end();
    });
    let rewritten = catch(|| inject_include_usage(&buf), m).flatten();
    let Some(body) = rewritten else {
        return Ok((RequestBody::new(Some(buf.freeze()), None, None, fault.clone()), false));
    };
    headers.remove(header::TRANSFER_ENCODING);
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    Ok((RequestBody::new(Some(Bytes::from(body)), None, None, fault.clone()), true))
}

/// Runs measurement code that must not fail a request.
fn catch<R>(f: impl FnOnce() -> R, m: &Measure) -> Option<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|_| m.ctx().stats.faults(1)).ok()
}

/// Copies bytes both ways between an upgraded client and upstream connection.
async fn relay_upgraded(client: hyper::upgrade::OnUpgrade, upstream: hyper::upgrade::OnUpgrade) {
    let (Ok(client), Ok(upstream)) = (client.await, upstream.await) else { return };
    let mut client = hyper_util::rt::TokioIo::new(client);
    let mut upstream = hyper_util::rt::TokioIo::new(upstream);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}
