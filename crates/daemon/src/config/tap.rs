//! `targets[].tap`: where a target's tap listens and which engine API it forwards to
//! (docs/config.md, docs/request-path.md), checked where written.

use std::net::SocketAddr;

use url::Url;

use super::Target;
use super::error::{Diagnostics, Pos};
use super::raw::{RawTap, RawTarget, S};

/// A validated tap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapConfig {
    /// Where clients connect. Port 0 picks a free port.
    pub listen: SocketAddr,
    /// The engine's API base, `http://host:port` with an optional path prefix.
    pub upstream: Url,
    /// Add `stream_options.include_usage` to streaming OpenAI requests that lack it, and
    /// remove the usage event it causes from the response.
    pub inject_usage: bool,
}

/// The tap of one target; `None` (with the errors reported) when it is unusable.
pub(super) fn tap(d: &mut Diagnostics, raw: &S<RawTap>, name: &str, scrape_url: Option<&Url>) -> Option<TapConfig> {
    let t = &raw.value;
    let listen = match t.listen.value.trim().parse::<SocketAddr>() {
        Ok(a) => Some(a),
        Err(_) => {
            d.error(
                t.listen.pos,
                format!(
                    "tap.listen: invalid address {:?}; expected IP:PORT like 0.0.0.0:8001 (the port clients then use)",
                    t.listen.value
                ),
            );
            None
        }
    };
    let upstream = upstream(d, &t.upstream);
    if let (Some(listen), Some(up)) = (listen, &upstream)
        && is_self(listen, up)
    {
        d.error(
            t.upstream.pos,
            format!(
                "tap.upstream {} is the tap's own listen address {listen}; point it at the engine's API, e.g. http://127.0.0.1:8000",
                up.as_str().trim_end_matches('/')
            ),
        );
        return None;
    }
    if let (Some(up), Some(scraped)) = (&upstream, scrape_url)
        && (up.host_str(), up.port_or_known_default()) != (scraped.host_str(), scraped.port_or_known_default())
    {
        d.warn(
            t.upstream.pos,
            format!(
                "target {name:?}: tap.upstream ({}) is not the host:port its metrics are scraped from; the tap's exact numbers and the histogram bracket will describe different servers",
                up.as_str().trim_end_matches('/')
            ),
        );
    }
    Some(TapConfig { listen: listen?, upstream: upstream?, inject_usage: t.inject_usage.unwrap_or(false) })
}

fn upstream(d: &mut Diagnostics, s: &S<String>) -> Option<Url> {
    let expected = "expected the engine's API base as an http:// URL, like http://127.0.0.1:8000";
    let url = match Url::parse(s.value.trim()) {
        Ok(u) => u,
        Err(e) => {
            d.error(
                s.pos,
                format!("tap.upstream: invalid URL {:?} ({e}); {expected}", crate::redact::url_str(&s.value)),
            );
            return None;
        }
    };
    let problem = if url.scheme() != "http" {
        Some(format!("scheme {:?} is not supported (the tap speaks plain HTTP to an engine beside it)", url.scheme()))
    } else if url.host().is_none() {
        Some("it has no host".to_string())
    } else if !url.username().is_empty() || url.password().is_some() {
        Some("it carries credentials; the tap forwards each client's own Authorization header".to_string())
    } else if url.query().is_some() || url.fragment().is_some() {
        Some("it has a query or fragment; give only scheme, host, port and an optional path prefix".to_string())
    } else {
        None
    };
    match problem {
        Some(p) => {
            d.error(s.pos, format!("tap.upstream {:?}: {p}; {expected}", crate::redact::url_str(&s.value)));
            None
        }
        None => Some(url),
    }
}

/// Whether `up` names the tap's own listen address (a loop).
fn is_self(listen: SocketAddr, up: &Url) -> bool {
    let Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) = up.host() else { return false };
    let Ok(addrs) = up.socket_addrs(|| None) else { return false };
    addrs.iter().any(|a| {
        a.port() == listen.port() && (a.ip() == listen.ip() || (listen.ip().is_unspecified() && a.ip().is_loopback()))
    })
}

/// Two listeners that cannot both bind: the same non-zero port, on the same address or
/// with either on every address.
fn clash(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0 && a.port() == b.port() && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// Refuses taps that would share a listen address with another tap or the daemon itself.
pub(super) fn distinct_addresses(d: &mut Diagnostics, raw: &[RawTarget], built: &[Target], daemon: Option<SocketAddr>) {
    let mut seen: Vec<(SocketAddr, &str)> = Vec::new();
    for t in built {
        let Some(tap) = &t.tap else { continue };
        let at = raw
            .iter()
            .find(|r| r.name.value.trim() == t.name)
            .and_then(|r| r.tap.as_ref())
            .map_or(Pos::FILE, |r| r.value.listen.pos);
        if let Some(d_addr) = daemon.filter(|a| clash(*a, tap.listen)) {
            d.error(
                at,
                format!(
                    "tap.listen {} of target {:?} clashes with the daemon's own listen address {d_addr}; give the tap its own port",
                    tap.listen, t.name
                ),
            );
        } else if let Some((_, other)) = seen.iter().find(|(a, _)| clash(*a, tap.listen)) {
            d.error(
                at,
                format!(
                    "tap.listen {} of target {:?} clashes with the tap of target {other:?}; each tap needs its own port",
                    tap.listen, t.name
                ),
            );
        }
        seen.push((tap.listen, &t.name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn clashes_need_the_same_port_and_overlapping_addresses() {
        assert!(clash(addr("0.0.0.0:8001"), addr("127.0.0.1:8001")));
        assert!(clash(addr("127.0.0.1:8001"), addr("127.0.0.1:8001")));
        assert!(clash(addr("[::]:8001"), addr("127.0.0.1:8001")));
        assert!(!clash(addr("127.0.0.1:8001"), addr("127.0.0.2:8001")));
        assert!(!clash(addr("127.0.0.1:8001"), addr("127.0.0.1:8002")));
        assert!(!clash(addr("127.0.0.1:0"), addr("127.0.0.1:0")), "port 0 picks a free port each time");
    }

    #[test]
    fn a_tap_pointing_at_itself_is_a_loop() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(is_self(addr("0.0.0.0:8001"), &u("http://127.0.0.1:8001")));
        assert!(is_self(addr("127.0.0.1:8001"), &u("http://127.0.0.1:8001/v1")));
        assert!(!is_self(addr("0.0.0.0:8001"), &u("http://127.0.0.1:8000")));
        assert!(!is_self(addr("0.0.0.0:80"), &u("http://engine")), "a name is not resolved");
    }
}
