//! A snapshot's incremental state: restored over the snapshot's store, it goes on as the
//! state that never stopped, bit for bit, without reading the stored points again; a state
//! that does not fit the config or the store is refused.

use std::sync::Arc;
use std::time::Duration;

use super::saved::SavedEvaluation;
use super::tests::{Counts, assert_same, config, scripted, thin_config};
use super::*;
use crate::evaluate::evaluate_target;
use crate::window::saved::SavedWindows;

/// A store, the same scrapes never thinned, and the state evaluated along the way, after
/// `n` scrapes.
struct Run {
    store: TargetWindows,
    whole: TargetWindows,
    live: Incremental,
    counts: [Counts; 4],
    t: i64,
    /// The last tick.
    now: i64,
    i: u32,
}

impl Run {
    fn new(cfg: &EvalConfig, n: u32) -> Run {
        let mut run = Run {
            store: TargetWindows::new(Duration::from_secs(60)),
            whole: TargetWindows::new(Duration::from_secs(60)),
            live: Incremental::new(cfg),
            counts: [Counts { created: 1.0, ..Counts::default() }; 4],
            t: 0,
            now: 0,
            i: 0,
        };
        for k in 0..n {
            run.push();
            if k % 3 == 0 {
                run.live.evaluate(&mut run.store, run.t, cfg);
            }
        }
        run.live.evaluate(&mut run.store, run.t, cfg);
        run.now = run.t;
        run
    }

    /// The next scrape, into both stores; its time and values.
    fn push(&mut self) -> Arc<crate::canonical::Snapshot> {
        let snap = Arc::new(scripted(self.i, &mut self.counts));
        self.t += 700 + i64::from(self.i % 5) * 300;
        self.store.push(self.t, snap.clone());
        self.whole.push(self.t, snap.clone());
        self.i += 1;
        snap
    }

    /// The snapshot of store and state, through the bytes a file holds.
    fn snapshot(&mut self) -> (SavedWindows, SavedEvaluation) {
        let state = self.live.saved(&mut self.store).expect("a state that follows its store");
        let state = postcard::to_allocvec(&state).unwrap();
        let windows = postcard::to_allocvec(&SavedWindows::save(&self.store)).unwrap();
        (postcard::from_bytes(&windows).unwrap(), postcard::from_bytes(&state).unwrap())
    }
}

#[test]
fn a_restored_state_goes_on_as_the_live_one_without_a_first_pass() {
    for cfg in [config(), thin_config()] {
        let mut run = Run::new(&cfg, 200);
        // Scrapes since the last tick: the store dropped points the windows still hold.
        for _ in 0..4 {
            run.push();
        }
        let front = run.store.seq_range().start;
        assert!(run.live.windows.iter().filter_map(|(_, w)| w.oldest()).any(|(s, _)| s < front), "none dropped");
        let (windows, state) = run.snapshot();
        let mut store = windows.restore(Duration::from_secs(60)).unwrap();
        let mut restored = Incremental::restored(&state, &cfg, &mut store).expect("restores");
        // Caught up with the store to the last tick: nothing is read again.
        assert_eq!(restored.next_seq, store.seq_after(run.now));
        assert!(restored.next_seq < store.seq_range().end, "the scrapes since wait for the next tick");
        let at = run.now;
        let want = evaluate_target(&run.whole, at, &cfg);
        assert_same(&want, &restored.reports(at, &cfg, RateMode::Prometheus), "as restored");
        for k in 0..90 {
            // Five before the first tick: the store drops points the windows still hold.
            for _ in 0..1 + 4 * usize::from(k == 0) {
                let snap = run.push();
                store.push(run.t, snap);
            }
            let want = evaluate_target(&run.whole, run.t, &cfg);
            assert_same(&want, &run.live.evaluate(&mut run.store, run.t, &cfg), &format!("live, tick {k}"));
            assert_same(&want, &restored.evaluate(&mut store, run.t, &cfg), &format!("restored, tick {k}"));
        }
        assert_eq!(restored.restarts, 0, "the restored state never started over");
        assert_eq!(store.thin_points(), run.store.thin_points());
    }
}

#[test]
fn a_state_that_does_not_fit_is_refused() {
    let cfg = thin_config();
    let mut run = Run::new(&cfg, 200);
    let (windows, state) = run.snapshot();
    let store = windows.restore(Duration::from_secs(60)).unwrap();
    assert!(Incremental::restored(&state, &cfg, &mut store.clone()).is_some());
    // Before its first tick a state has nothing to save.
    let mut fresh = Incremental::new(&cfg);
    assert!(fresh.saved(&mut TargetWindows::new(Duration::from_secs(60))).is_none());
    // Other windows.
    let other = EvalConfig { windows: cfg.windows[1..].to_vec(), ..cfg.clone() };
    assert!(Incremental::restored(&state, &other, &mut store.clone()).is_none());
    // A store that kept less than the windows held (restored for shorter windows).
    let short = windows.restore(Duration::from_secs(20)).unwrap();
    assert!(short.len() < store.len());
    assert!(Incremental::restored(&state, &cfg, &mut short.clone()).is_none());
    // Another format, and indices that do not resolve.
    let mut bad = state.clone();
    bad.format += 1;
    assert!(Incremental::restored(&bad, &cfg, &mut store.clone()).is_none());
    let mut json = serde_json::to_value(&state).unwrap();
    json["windows"][0]["ids"] = serde_json::json!([u32::MAX]);
    let bad: SavedEvaluation = serde_json::from_value(json).unwrap();
    assert!(Incremental::restored(&bad, &cfg, &mut store.clone()).is_none());
    let mut json = serde_json::to_value(&state).unwrap();
    json["windows"][2]["tail"][1] = serde_json::json!(-1);
    let bad: SavedEvaluation = serde_json::from_value(json).unwrap();
    assert!(Incremental::restored(&bad, &cfg, &mut store.clone()).is_none(), "the oldest point is not at its time");
}
