//! File descriptors: the soft limit is raised to the hard limit at start, and the
//! listeners (the HTTP server, the OTLP receiver, each tap) share only what is left after a
//! reserve for scrapes, alert delivery and the process itself, so that idle clients of one
//! can never take the descriptors a scrape or another listener needs (docs/limits.md).

/// Descriptors kept for the process itself: the listener, the runtime's epoll and wakers,
/// log output, NVML, a bearer-token file being read, and slack.
pub const RESERVE_BASE: u64 = 64;

/// Descriptors kept per outbound destination (a target or an alert receiver): its pooled
/// connection, plus one while a timed-out request's socket is being torn down.
pub const RESERVE_PER_DESTINATION: u64 = 2;

/// The fewest connections the server is given, however tight the limit: /metrics must
/// stay reachable.
pub const MIN_CONNECTIONS: usize = 8;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and returns the soft limit now in
/// force, or `None` where it cannot be read.
pub fn raise_nofile_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes into the struct we pass.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return None;
        }
        // Linux refuses a soft limit above fs.nr_open (2^20 by default), even when the
        // hard limit is "unlimited".
        let want = if lim.rlim_max == libc::RLIM_INFINITY { 1 << 20 } else { lim.rlim_max };
        if want > lim.rlim_cur {
            let raised = libc::rlimit { rlim_cur: want, rlim_max: lim.rlim_max };
            // SAFETY: setrlimit reads the struct we pass.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                lim.rlim_cur = want;
            }
        }
        Some(lim.rlim_cur)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The soft `RLIMIT_NOFILE` in force, for `process_max_fds`.
pub fn nofile_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes into the struct we pass.
        (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0).then_some(lim.rlim_cur)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// A listener's claim on the descriptors left after the reserve.
#[derive(Debug, Clone, PartialEq)]
pub struct Listener {
    /// The config key of its cap, for the message when it is lowered.
    pub key: String,
    pub configured: usize,
    /// Descriptors one of its connections can hold: 1, or 2 for a tap (the client's and
    /// the upstream connection it forwards to).
    pub per_connection: u64,
}

/// The caps of `listeners`: as configured when together they fit under the descriptor
/// limit `nofile` after the reserve for `destinations` outbound destinations; otherwise each
/// is lowered in proportion (to at least [`MIN_CONNECTIONS`]), with a message saying why.
pub fn fit(listeners: &[Listener], nofile: Option<u64>, destinations: usize) -> (Vec<usize>, Vec<String>) {
    let configured: Vec<usize> = listeners.iter().map(|l| l.configured).collect();
    let Some(nofile) = nofile else { return (configured, Vec::new()) };
    let reserve = RESERVE_BASE + RESERVE_PER_DESTINATION * destinations as u64;
    let room = nofile.saturating_sub(reserve);
    let demand: u64 = listeners.iter().map(|l| (l.configured as u64).saturating_mul(l.per_connection)).sum();
    if demand <= room {
        return (configured, Vec::new());
    }
    let mut caps = Vec::new();
    let mut why = Vec::new();
    for l in listeners {
        let share = (l.configured as u64).saturating_mul(room) / demand.max(1);
        let cap = (share as usize).max(MIN_CONNECTIONS).min(l.configured);
        if cap < l.configured {
            let shared = if listeners.len() > 1 {
                format!(", and the rest is shared by {} listeners", listeners.len())
            } else {
                String::new()
            };
            why.push(format!(
                "{} lowered from {} to {cap}: the descriptor limit (ulimit -n) is {nofile} and {reserve} are kept for \
                 scraping {destinations} destination(s){shared}; raise the limit to allow more",
                l.key, l.configured
            ));
        }
        caps.push(cap);
    }
    (caps, why)
}

/// The HTTP server's connection cap when it is the only listener: `configured`, lowered so
/// that `destinations` outbound destinations keep their reserve under the descriptor limit
/// `nofile`. The message, when there is one, says why it was lowered.
pub fn connection_cap(configured: usize, nofile: Option<u64>, destinations: usize) -> (usize, Option<String>) {
    let one = Listener { key: "server.max_connections".into(), configured, per_connection: 1 };
    let (caps, mut why) = fit(&[one], nofile, destinations);
    (caps[0], why.pop())
}

/// Every listener's cap for `config`.
#[derive(Debug, Clone, PartialEq)]
pub struct Caps {
    pub server: usize,
    /// 0 without `otlp:`.
    pub otlp: usize,
    /// Per tapped target, by name, in config order.
    pub taps: Vec<(String, usize)>,
    /// Why caps were lowered, one message per cap.
    pub lowered: Vec<String>,
}

impl Caps {
    /// The cap of `target`'s tap.
    pub fn tap(&self, target: &str) -> usize {
        self.taps.iter().find(|(t, _)| t == target).map_or(MIN_CONNECTIONS, |(_, c)| *c)
    }
}

/// The caps of the HTTP server, the OTLP receiver and every tap of `config`, fitted together
/// under `nofile` with the reserve for the targets and alert destinations.
pub fn caps(config: &crate::config::Config, nofile: Option<u64>) -> Caps {
    let mut listeners = vec![Listener {
        key: "server.max_connections".into(),
        configured: config.server.max_connections,
        per_connection: 1,
    }];
    if let Some(o) = &config.otlp {
        listeners.push(Listener {
            key: "otlp.max_connections".into(),
            configured: o.guards.max_connections,
            per_connection: 1,
        });
    }
    let tapped: Vec<(&str, usize)> = config
        .targets
        .iter()
        .filter_map(|t| t.tap.as_ref().map(|tap| (t.name.as_str(), tap.guards.max_connections)))
        .collect();
    for (name, configured) in &tapped {
        let key = format!("targets[{name}].tap.max_connections");
        listeners.push(Listener { key, configured: *configured, per_connection: 2 });
    }
    // The 1 is the webhook or the dcgm-exporter, should there be one.
    let destinations = config.targets.len() + config.alerting.alertmanager_urls().len() + 1;
    let (caps, lowered) = fit(&listeners, nofile, destinations);
    let otlp = if config.otlp.is_some() { caps[1] } else { 0 };
    let first_tap = if config.otlp.is_some() { 2 } else { 1 };
    let taps = tapped.iter().zip(&caps[first_tap..]).map(|((n, _), c)| (n.to_string(), *c)).collect();
    Caps { server: caps[0], otlp, taps, lowered }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_the_reserve_free() {
        assert_eq!(connection_cap(256, Some(1 << 20), 3), (256, None));
        assert_eq!(connection_cap(256, None, 3), (256, None));
        let (cap, why) = connection_cap(256, Some(256), 10);
        assert_eq!(cap, 256 - 64 - 20);
        assert!(why.unwrap().contains("ulimit -n) is 256"));
        assert_eq!(connection_cap(256, Some(40), 10).0, MIN_CONNECTIONS);
    }

    #[test]
    fn listeners_share_the_room_in_proportion() {
        let l = |key: &str, configured, per_connection| Listener { key: key.into(), configured, per_connection };
        let all = [l("server.max_connections", 256, 1), l("otlp.max_connections", 64, 1), l("t.tap", 1024, 2)];
        assert_eq!(fit(&all, Some(1 << 20), 1), (vec![256, 64, 1024], Vec::new()));
        let (caps, why) = fit(&all, Some(1024), 1);
        // 1024 - 66 = 958 descriptors for a demand of 256 + 64 + 2048.
        assert_eq!(caps, vec![256 * 958 / 2368, 64 * 958 / 2368, 1024 * 958 / 2368]);
        assert!(caps[0] + caps[1] + 2 * caps[2] <= 958);
        assert_eq!(why.len(), 3);
        assert!(why[2].starts_with("t.tap lowered from 1024 to 414"), "{}", why[2]);
        assert!(why[2].contains("shared by 3 listeners"), "{}", why[2]);
        let (tight, _) = fit(&all, Some(80), 1);
        assert_eq!(tight, vec![MIN_CONNECTIONS; 3], "never below the floor");
    }

    #[test]
    fn raising_the_limit_never_lowers_it() {
        let before = nofile_limit().unwrap();
        let after = raise_nofile_limit().unwrap();
        assert!(after >= before);
        assert_eq!(nofile_limit(), Some(after));
    }
}
