//! Helpers shared by the integration tests.
//!
//! It reaches `crate::tools` (tests/it/tools), a module of every binary that includes it.
#![allow(dead_code)]

pub mod prometheus;
pub mod recording;

use std::time::{Duration, Instant};

/// How long a test waits for something that should happen "soon": a daemon becoming ready, a
/// scrape being counted, a reload being applied. CI runs every test of this binary at once on
/// 2 cores, many of them spawning daemons, Prometheus and browsers, so a step that takes
/// milliseconds on an idle machine can take many seconds there. A wait ends as soon as its
/// condition holds, so only a failing test pays the full wait.
pub const PATIENCE: Duration = Duration::from_secs(90);

/// How often [`until`] and [`until_async`] look again.
const POLL: Duration = Duration::from_millis(100);

/// Calls `f` every ~100 ms until it returns `Some`, and returns that; panics naming `what` if
/// `limit` passes first.
pub fn until<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let began = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(began.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(POLL);
    }
}

/// [`until`] for a condition that has to be awaited.
pub async fn until_async<T>(limit: Duration, what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let began = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(began.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(POLL).await;
    }
}
