//! `targets[].tap`: where a target's tap listens and which engine API it forwards to
//! (docs/config.md, docs/request-path.md), checked where written.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use url::Url;

use super::error::{Diagnostics, Pos};
use super::raw::{RawTap, RawTarget, S};
use super::types::{DEFAULT_TAP_MAX_CONNECTIONS, ListenerGuards, TapConfig, Target};
use crate::duration::parse_positive_duration;

/// The guard keys of a listener section as written.
pub(super) struct RawGuards<'a> {
    pub max_connections: Option<&'a S<u64>>,
    pub header_read_timeout: Option<&'a S<String>>,
    pub idle_timeout: Option<&'a S<String>>,
    pub body_read_timeout: Option<&'a S<String>>,
}

/// `raw` over `base`, each error at its value; `section` prefixes the keys in messages.
pub(super) fn guards(d: &mut Diagnostics, raw: RawGuards<'_>, section: &str, base: ListenerGuards) -> ListenerGuards {
    let mut out = base;
    if let Some(s) = raw.max_connections {
        match usize::try_from(s.value) {
            Ok(n) if n >= 1 => out.max_connections = n,
            _ => d.error(s.pos, format!("{section}.max_connections must be at least 1, got {}", s.value)),
        }
    }
    let mut duration = |s: Option<&S<String>>, key: &str, into: &mut Duration| {
        if let Some(s) = s {
            match parse_positive_duration(&s.value) {
                Ok(v) => *into = v,
                Err(e) => d.error(s.pos, format!("{section}.{key}: {e}")),
            }
        }
    };
    duration(raw.header_read_timeout, "header_read_timeout", &mut out.header_read_timeout);
    duration(raw.idle_timeout, "idle_timeout", &mut out.idle_timeout);
    duration(raw.body_read_timeout, "body_read_timeout", &mut out.body_read_timeout);
    out
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
        && reaches(up, listen)
    {
        d.error(
            t.upstream.pos,
            format!(
                "tap.upstream {} is the tap's own listen address {listen}: it loops back to the tap; point it at the engine's API, e.g. http://127.0.0.1:8000",
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
    let raw_guards = RawGuards {
        max_connections: t.max_connections.as_ref(),
        header_read_timeout: t.header_read_timeout.as_ref(),
        idle_timeout: t.idle_timeout.as_ref(),
        body_read_timeout: t.body_read_timeout.as_ref(),
    };
    let guards = guards(d, raw_guards, "tap", ListenerGuards::with_cap(DEFAULT_TAP_MAX_CONNECTIONS));
    Some(TapConfig { listen: listen?, upstream: upstream?, inject_usage: t.inject_usage.unwrap_or(false), guards })
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

/// Whether a connection to `up` reaches a listener on `listen`: the same port on the same
/// address, on a loopback address or this host's own when `listen` is every address
/// (`0.0.0.0`, `[::]`), or on `localhost`, which is this host by definition (RFC 6761).
/// Other names are not resolved: that would make the check depend on the DNS of the moment.
fn reaches(up: &Url, listen: SocketAddr) -> bool {
    if up.port_or_known_default() != Some(listen.port()) || listen.port() == 0 {
        return false;
    }
    let ip = match up.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(url::Host::Ipv6(ip)) => ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4),
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            if name != "localhost" && !name.ends_with(".localhost") {
                return false;
            }
            // Whichever of 127.0.0.1 and ::1 it resolves to, it is this host.
            return listen.ip().is_unspecified() || listen.ip().is_loopback();
        }
        None => return false,
    };
    // Connecting to 0.0.0.0 or [::] reaches this host's loopback.
    let here = ip.is_unspecified() || ip.is_loopback() || local_addresses().contains(&ip);
    let listen_ip = match listen.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    if listen_ip.is_unspecified() {
        // An IPv4 wildcard takes IPv4 only; an IPv6 one (dual-stack on Linux) takes both.
        return here && (listen_ip.is_ipv6() || ip.is_ipv4());
    }
    ip == listen_ip || (ip.is_unspecified() && listen_ip.is_loopback())
}

/// This host's interface addresses, where they can be read.
fn local_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    #[cfg(unix)]
    {
        let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
        // SAFETY: getifaddrs fills `head` with a list that freeifaddrs releases; each entry's
        // address is read only when it is non-null and of the family it says.
        unsafe {
            if libc::getifaddrs(&mut head) != 0 {
                return out;
            }
            let mut at = head;
            while !at.is_null() {
                let a = (*at).ifa_addr;
                if !a.is_null() {
                    match i32::from((*a).sa_family) {
                        libc::AF_INET => {
                            let v4 = &*(a as *const libc::sockaddr_in);
                            out.push(IpAddr::from(u32::from_be(v4.sin_addr.s_addr).to_be_bytes()));
                        }
                        libc::AF_INET6 => {
                            let v6 = &*(a as *const libc::sockaddr_in6);
                            out.push(IpAddr::from(v6.sin6_addr.s6_addr));
                        }
                        _ => {}
                    }
                }
                at = (*at).ifa_next;
            }
            libc::freeifaddrs(head);
        }
    }
    out
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
    loops(d, raw, built);
}

/// Refuses taps that forward to each other in a ring: each would pass every request on to
/// the next without end. Reported at the upstream of the tap that closes the ring.
fn loops(d: &mut Diagnostics, raw: &[RawTarget], built: &[Target]) {
    let taps: Vec<(&str, &TapConfig)> = built.iter().filter_map(|t| Some((t.name.as_str(), t.tap.as_ref()?))).collect();
    let next = |i: usize| taps.iter().position(|(_, other)| reaches(&taps[i].1.upstream, other.listen));
    for start in 0..taps.len() {
        let mut at = start;
        let mut path = vec![start];
        while let Some(n) = next(at) {
            if n == start {
                // The ring is reported once, at its last tap in config order.
                if path.iter().max() == Some(&start) && path.len() > 1 {
                    let (name, tap) = taps[start];
                    let pos = raw
                        .iter()
                        .find(|r| r.name.value.trim() == name)
                        .and_then(|r| r.tap.as_ref())
                        .map_or(Pos::FILE, |r| r.value.upstream.pos);
                    d.error(
                        pos,
                        format!(
                            "tap.upstream {} of target {name:?} loops back to the tap of target {:?}, which forwards to it again; point one of them at the engine's API",
                            tap.upstream.as_str().trim_end_matches('/'),
                            taps[path[1]].0
                        ),
                    );
                }
                break;
            }
            if path.contains(&n) {
                break;
            }
            path.push(n);
            at = n;
        }
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
        let loops = |listen: &str, up: &str| reaches(&Url::parse(up).unwrap(), addr(listen));
        assert!(loops("0.0.0.0:8001", "http://127.0.0.1:8001"));
        assert!(loops("127.0.0.1:8001", "http://127.0.0.1:8001/v1"));
        assert!(loops("0.0.0.0:8001", "http://localhost:8001"));
        assert!(loops("127.0.0.1:8001", "http://LOCALHOST.:8001"));
        assert!(loops("0.0.0.0:8001", "http://0.0.0.0:8001"));
        assert!(loops("127.0.0.1:8001", "http://0.0.0.0:8001"));
        assert!(loops("[::]:8001", "http://[::ffff:127.0.0.1]:8001"));
        assert!(loops("[::]:8001", "http://127.0.0.1:8001"), "an IPv6 wildcard takes IPv4 too");
        assert!(loops("0.0.0.0:80", "http://127.0.0.1"), "the scheme's port");
        assert!(!loops("0.0.0.0:8001", "http://[::1]:8001"), "an IPv4 wildcard does not take IPv6");
        assert!(!loops("0.0.0.0:8001", "http://127.0.0.1:8000"));
        assert!(!loops("127.0.0.1:8001", "http://127.0.0.2:8001"));
        assert!(!loops("0.0.0.0:80", "http://engine"), "a name other than localhost is not resolved");
        assert!(!loops("127.0.0.1:0", "http://127.0.0.1:0"), "port 0 is a new port");
        if let Some(own) = local_addresses().into_iter().find(|a| a.is_ipv4() && !a.is_loopback()) {
            assert!(loops("0.0.0.0:8001", &format!("http://{own}:8001")), "this host's own address {own}");
        }
    }
}
