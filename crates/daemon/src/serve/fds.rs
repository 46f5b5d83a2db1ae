//! File descriptors: the soft limit is raised to the hard limit at start, and the HTTP
//! server may hold only what is left after a reserve for scrapes, alert delivery and the
//! process itself, so that idle clients can never take the descriptors a scrape needs
//! (docs/limits.md).

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

/// The HTTP server's connection cap: `configured`, lowered so that `destinations` outbound
/// destinations keep their reserve under the descriptor limit `nofile`. The message, when
/// there is one, says why it was lowered.
pub fn connection_cap(configured: usize, nofile: Option<u64>, destinations: usize) -> (usize, Option<String>) {
    let Some(nofile) = nofile else { return (configured, None) };
    let reserve = RESERVE_BASE + RESERVE_PER_DESTINATION * destinations as u64;
    let room = nofile.saturating_sub(reserve).max(MIN_CONNECTIONS as u64);
    if (configured as u64) <= room {
        return (configured, None);
    }
    let cap = room as usize;
    let why = format!(
        "server.max_connections lowered from {configured} to {cap}: the descriptor limit (ulimit -n) is {nofile} and \
         {reserve} are kept for scraping {destinations} destination(s); raise the limit to allow more"
    );
    (cap, Some(why))
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
    fn raising_the_limit_never_lowers_it() {
        let before = nofile_limit().unwrap();
        let after = raise_nofile_limit().unwrap();
        assert!(after >= before);
        assert_eq!(nofile_limit(), Some(after));
    }
}
