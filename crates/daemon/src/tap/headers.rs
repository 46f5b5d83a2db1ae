//! Which headers a proxy drops and re-makes per connection (RFC 9110 §7.6.1), and whether a
//! request asks to switch protocols.

use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::http1::connection_tokens;

/// Whether the request asks to switch protocols (WebSocket). An offer of `h2c` alone is
/// not: the tap declines it (it speaks HTTP/1.1), drops it with the hop-by-hop headers, and
/// measures the request as usual, as the engine's own HTTP/1.1 server would serve it.
pub(super) fn is_upgrade(headers: &HeaderMap) -> bool {
    let protocols = headers.get_all(header::UPGRADE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(','));
    let mut protocols = protocols.map(str::trim).filter(|p| !p.is_empty()).peekable();
    protocols.peek().is_some()
        && !protocols.all(|p| p.eq_ignore_ascii_case("h2c"))
        && connection_tokens(headers).any(|t| t.eq_ignore_ascii_case("upgrade"))
}

/// Drops the headers that describe one connection rather than the message (RFC 9110
/// §7.6.1): those named in `Connection`, and the standard hop-by-hop set. On an upgrade,
/// `Connection: upgrade` and `Upgrade` are what the next hop must see, so they stay.
pub(super) fn remove_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    let listed: Vec<HeaderName> =
        connection_tokens(headers).filter_map(|n| HeaderName::from_bytes(n.as_bytes()).ok()).collect();
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
