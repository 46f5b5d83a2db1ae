//! One request through the tap: forward it upstream as the client sent it (less the
//! hop-by-hop headers a proxy must drop), relay the response the same way, and measure the
//! generation routes on the way (docs/request-path.md).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use goodput_core::request::body::{MAX_REQUEST_BODY, inject_include_usage};
use goodput_core::request::strip::UsageStripper;
use goodput_core::request::{End, Meter, Route, Unmeasured};
use http_body_util::BodyExt;
use hyper::body::{Body, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;

use super::body::{RequestBody, ResponseBody, TapBody};
use super::measure::{Ctx, Measure};

/// Everything a request handler needs; one per tap.
pub(super) struct Proxy {
    pub client: Client<HttpConnector, RequestBody>,
    /// `scheme://authority` of the upstream.
    pub origin: String,
    /// The upstream URL's path without its trailing slash ("" for the root).
    pub prefix: String,
    pub inject_usage: bool,
    pub ctx: Arc<Ctx>,
}

impl Proxy {
    pub async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Result<Response<TapBody>, Infallible> {
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
        let (mut parts, incoming) = req.into_parts();
        let uri = match self.upstream_uri(&parts.uri) {
            Ok(u) => u,
            Err(e) => return Ok(own(StatusCode::BAD_REQUEST, format!("goodput tap: cannot forward this path: {e}\n"))),
        };
        parts.uri = uri;
        parts.version = hyper::Version::HTTP_11;
        remove_hop_by_hop(&mut parts.headers, upgrade);

        let inject = self.inject_usage && route.is_some_and(Route::is_openai) && measure.is_some();
        let (body, injected) = match (inject, &measure) {
            (true, Some(m)) => match read_for_inject(incoming, &mut parts.headers, m).await {
                Ok(b) => b,
                Err(()) => {
                    m.finish(End::ClientAbort);
                    return Ok(own(StatusCode::BAD_REQUEST, "goodput tap: the request body failed\n"));
                }
            },
            _ => (RequestBody::new(None, Some(incoming), measure.clone()), false),
        };

        let resp = match self.client.request(Request::from_parts(parts, body)).await {
            Ok(r) => r,
            Err(e) => {
                if let Some(m) = &measure {
                    m.finish(if m.client_gone() { End::ClientAbort } else { End::UpstreamReset });
                }
                tracing::debug!(target_name = %self.ctx.target, error = %e, "tap: upstream request failed");
                return Ok(own(
                    StatusCode::BAD_GATEWAY,
                    format!("goodput tap: cannot reach the upstream {}: {e}\n", self.origin),
                ));
            }
        };
        let mut resp = resp;
        if resp.status() == StatusCode::SWITCHING_PROTOCOLS
            && let Some(client_side) = client_upgrade
        {
            let upstream_side = hyper::upgrade::on(&mut resp);
            tokio::spawn(relay_upgraded(client_side, upstream_side));
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

    /// The upstream URI for a request's path and query.
    fn upstream_uri(&self, uri: &Uri) -> Result<Uri, hyper::http::uri::InvalidUri> {
        let pq = uri.path_and_query().map_or("/", |p| p.as_str());
        Uri::try_from(format!("{}{}{pq}", self.origin, self.prefix))
    }
}

fn own(status: StatusCode, text: impl Into<Bytes>) -> Response<TapBody> {
    let mut r = Response::new(TapBody::own(text));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

fn is_event_stream(ctype: Option<&str>) -> bool {
    ctype.and_then(|c| c.split(';').next()).is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
}

/// Reads a request body of up to [`MAX_REQUEST_BODY`] to add `include_usage` to it. Past
/// the cap (or with a longer Content-Length) what was read is sent on unchanged, followed by
/// the rest. `Err` when the client's body fails.
async fn read_for_inject(
    mut incoming: Incoming,
    headers: &mut HeaderMap,
    m: &Arc<Measure>,
) -> Result<(RequestBody, bool), ()> {
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_REQUEST_BODY as u64) {
        return Ok((RequestBody::new(None, Some(incoming), Some(m.clone())), false));
    }
    let mut buf = BytesMut::new();
    while !incoming.is_end_stream() {
        let Some(frame) = incoming.frame().await else { break };
        let frame = frame.map_err(|_| m.set_client_gone())?;
        let Ok(data) = frame.into_data() else { continue };
        buf.extend_from_slice(&data);
        if buf.len() > MAX_REQUEST_BODY {
            m.with(|meter| meter.request_body(&buf));
            return Ok((RequestBody::new(Some(buf.freeze()), Some(incoming), Some(m.clone())), false));
        }
    }
    m.with(|meter| {
        meter.request_body(&buf);
        meter.request_end();
    });
    let rewritten = catch(|| inject_include_usage(&buf), m).flatten();
    let Some(body) = rewritten else {
        return Ok((RequestBody::new(Some(buf.freeze()), None, None), false));
    };
    headers.remove(header::TRANSFER_ENCODING);
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    Ok((RequestBody::new(Some(Bytes::from(body)), None, None), true))
}

/// Runs measurement code that must not fail a request.
fn catch<R>(f: impl FnOnce() -> R, m: &Measure) -> Option<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|_| m.ctx().stats.faults(1)).ok()
}

/// Whether the request asks to switch protocols (WebSocket). An offer of `h2c` alone is
/// not: the tap declines it (it speaks HTTP/1.1), drops it with the hop-by-hop headers, and
/// measures the request as usual, as the engine's own HTTP/1.1 server would serve it.
fn is_upgrade(headers: &HeaderMap) -> bool {
    let protocols = headers.get_all(header::UPGRADE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(','));
    let mut protocols = protocols.map(str::trim).filter(|p| !p.is_empty()).peekable();
    protocols.peek().is_some()
        && !protocols.all(|p| p.eq_ignore_ascii_case("h2c"))
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// Drops the headers that describe one connection rather than the message (RFC 9110
/// §7.6.1): those named in `Connection`, and the standard hop-by-hop set. On an upgrade,
/// `Connection: upgrade` and `Upgrade` are what the next hop must see, so they stay.
fn remove_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        if !(upgrade && name == header::UPGRADE) {
            headers.remove(name);
        }
    }
    for name in [header::TE, header::TRAILER, header::TRANSFER_ENCODING] {
        headers.remove(name);
    }
    for name in ["keep-alive", "proxy-connection"] {
        headers.remove(name);
    }
    if upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    } else {
        headers.remove(header::CONNECTION);
        headers.remove(header::UPGRADE);
    }
}

/// Copies bytes both ways between an upgraded client and upstream connection.
async fn relay_upgraded(client: hyper::upgrade::OnUpgrade, upstream: hyper::upgrade::OnUpgrade) {
    let (Ok(client), Ok(upstream)) = (client.await, upstream.await) else { return };
    let mut client = hyper_util::rt::TokioIo::new(client);
    let mut upstream = hyper_util::rt::TokioIo::new(upstream);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn hop_by_hop_headers_go_and_end_to_end_headers_stay() {
        let mut h = headers(&[
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("te", "trailers"),
            ("authorization", "Bearer k"),
            ("content-type", "application/json"),
            ("host", "engine:8000"),
        ]);
        remove_hop_by_hop(&mut h, false);
        let mut left: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        left.sort();
        assert_eq!(left, vec!["authorization", "content-type", "host"]);
    }

    #[test]
    fn an_upgrade_keeps_what_the_next_hop_needs() {
        let mut h = headers(&[("connection", "Upgrade"), ("upgrade", "websocket"), ("sec-websocket-key", "k")]);
        assert!(is_upgrade(&h));
        remove_hop_by_hop(&mut h, true);
        assert_eq!(h.get("upgrade").unwrap(), "websocket");
        assert_eq!(h.get("connection").unwrap(), "upgrade");
        assert!(h.contains_key("sec-websocket-key"));
        assert!(!is_upgrade(&headers(&[("upgrade", "websocket")])), "no Connection: upgrade");
        let mut h2c =
            headers(&[("connection", "Upgrade, HTTP2-Settings"), ("upgrade", "h2c"), ("http2-settings", "x")]);
        assert!(!is_upgrade(&h2c), "an h2c offer is declined, not relayed");
        remove_hop_by_hop(&mut h2c, false);
        assert!(h2c.is_empty(), "{h2c:?}");
    }
}
