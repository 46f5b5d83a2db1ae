//! The request store across a config reload (docs/discovery.md#reload): the requests it
//! holds are data, judged again under the new SLOs and windows rather than dropped.
//!
//! A series whose SLOs (by definition) and windows are unchanged is kept as it is. Any
//! other keeps its records, status counts and coverage, and rebuilds what depends on the
//! config from its records: each window's time slots (a window kept with unchanged SLOs
//! keeps its slots), and the per-SLO good counts, which carry on for an SLO whose
//! definition is unchanged and start from 0 for a new or changed one (a counter reset,
//! as `rate()` expects). Slots rebuilt from records have no ITL sketch: ITL quantiles of
//! such a window cover the requests finished since the reload. A series a flood pushed
//! records out of (past `max_records_per_series`) can rebuild its slots only from the
//! records it still holds.

use super::judge::{Judgement, judge};
use super::store::{RequestStore, Series, StoreConfig};

/// What a reload did to the store's series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rebuilt {
    /// Series whose SLOs and windows did not change.
    pub kept: usize,
    /// Series judged again from their records.
    pub rebuilt: usize,
}

impl RequestStore {
    /// Takes the targets, windows, quantiles and SLOs of a new config at `now_ms`.
    pub fn reconfigure(&mut self, cfg: StoreConfig, now_ms: i64) -> Rebuilt {
        let old_slos: Vec<String> = self.cfg.slos.iter().map(|s| format!("{s:?}")).collect();
        let old_windows: Vec<i64> = self.cfg.windows.iter().map(|w| w.millis()).collect();
        self.max_window_ms = cfg.windows.iter().map(|w| w.millis()).max().unwrap_or(0);
        self.cfg = cfg;
        let same_windows = old_windows == self.cfg.windows.iter().map(|w| w.millis()).collect::<Vec<_>>();
        let mut out = Rebuilt::default();
        for (key, s) in std::mem::take(&mut self.series) {
            let fresh = self.new_series(&key);
            let was: Vec<&str> = s.slos.iter().map(|&i| old_slos[i].as_str()).collect();
            let now: Vec<String> = fresh.slos.iter().map(|&i| format!("{:?}", self.cfg.slos[i])).collect();
            let same_slos = was.len() == now.len() && was.iter().zip(&now).all(|(a, b)| *a == b.as_str());
            let series = if same_slos && same_windows {
                out.kept += 1;
                Series { slos: fresh.slos, running: Vec::new(), ..s }
            } else {
                out.rebuilt += 1;
                self.rejudged(s, fresh, &was, &now, same_slos, now_ms)
            };
            self.series.insert(key, series);
        }
        out
    }

    /// `old` under the config `fresh` was made for: records, status counts and coverage
    /// kept, good counts of unchanged SLOs kept, slots rebuilt where they must be.
    fn rejudged(
        &self,
        old: Series,
        mut fresh: Series,
        was: &[&str],
        now: &[String],
        same_slos: bool,
        now_ms: i64,
    ) -> Series {
        fresh.good = now.iter().map(|d| was.iter().position(|w| *w == d.as_str()).map_or(0, |i| old.good[i])).collect();
        let mut old_rings = old.rings;
        let mut refill = Vec::new();
        for (i, ring) in fresh.rings.iter_mut().enumerate() {
            match old_rings.iter().position(|r| same_slos && r.window_ms() == ring.window_ms()) {
                Some(at) => *ring = old_rings.swap_remove(at),
                None => refill.push(i),
            }
        }
        if !refill.is_empty() {
            for c in &old.raw {
                let judgements: Vec<Judgement> = fresh.slos.iter().map(|&i| judge(c, &self.cfg.slos[i])).collect();
                for &i in &refill {
                    fresh.rings[i].add(c, &judgements, &[], now_ms);
                }
            }
        }
        fresh.raw = old.raw;
        fresh.complete_after = old.complete_after;
        fresh.first_started = old.first_started;
        fresh.by_status = old.by_status;
        fresh.evicted_by_cap = old.evicted_by_cap;
        fresh
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::duration::Window;
    use crate::request::{ItlGap, RequestRecord, Source, Status, TokenCount};
    use crate::slo::{Clause, Objective, Scope, Slo};

    const T0: f64 = 1_700_000_000.0;

    fn slo(name: &str, ttft_ms: u64) -> Slo {
        Slo {
            name: name.into(),
            ttft: Some(Duration::from_millis(ttft_ms)),
            tpot: None,
            e2e: None,
            objective: Objective::new(0.9).unwrap(),
            scope: Scope::all(),
        }
    }

    fn config(windows: &[u64], slos: Vec<Slo>) -> StoreConfig {
        StoreConfig {
            targets: vec!["t".into()],
            windows: windows.iter().map(|&s| Window::from_secs(s)).collect(),
            alert_only: Vec::new(),
            quantiles: vec![0.5],
            slos,
            max_records_per_series: 1000,
            max_series_per_target: 4,
        }
    }

    fn record(at: f64, ttft: f64) -> RequestRecord {
        RequestRecord {
            source: Source::Tap,
            target: "t".into(),
            model: "m".into(),
            status: Status::Ok,
            finished_unix: T0 + at,
            e2e_s: 1.0,
            ttft_s: Some(ttft),
            tpot_s: Some(0.01),
            prompt_tokens: Some(10),
            output_tokens: Some(TokenCount { value: 10, exact: true }),
            itl: vec![ItlGap { seconds: 0.01, tokens: 1 }],
            engine: None,
            request_id: None,
        }
    }

    /// (window seconds, slo) → jointly good requests and population.
    fn good(store: &mut RequestStore, now_ms: i64) -> Vec<(i64, String, u64, u64)> {
        let mut out = Vec::new();
        for s in store.evaluate(now_ms) {
            for (w, r) in &s.windows {
                for slo in &r.slos {
                    let c = slo.counts[&Clause::Joint];
                    out.push((w.millis() / 1000, slo.slo.clone(), c.good_lower, c.population));
                }
            }
        }
        out
    }

    #[test]
    fn held_requests_are_judged_again_under_new_thresholds_and_windows() {
        let mut store = RequestStore::new(config(&[60], vec![slo("a", 200), slo("b", 200)]));
        let now_ms = (T0 as i64 + 50) * 1000;
        // Ten requests, TTFT 0.1 … 1.0 s.
        store.ingest((1..=10).map(|i| record(i as f64 * 4.0, i as f64 / 10.0)), now_ms);
        assert_eq!(good(&mut store, now_ms), [(60, "a".into(), 2, 10), (60, "b".into(), 2, 10)]);
        let counted = |s: &RequestStore| s.counters().series[0].good_requests.clone();
        assert_eq!(counted(&store)["a"], 2);

        // Unchanged: kept as it is.
        assert_eq!(store.reconfigure(config(&[60], vec![slo("a", 200), slo("b", 200)]), now_ms).kept, 1);

        // a's threshold moves to 500 ms, b stays, a 5m window is added: every held request
        // is judged again, b's cumulative count carries on and a's starts over.
        let r = store.reconfigure(config(&[60, 300], vec![slo("a", 500), slo("b", 200)]), now_ms);
        assert_eq!(r, Rebuilt { kept: 0, rebuilt: 1 });
        assert_eq!(
            good(&mut store, now_ms),
            [(60, "a".into(), 5, 10), (60, "b".into(), 2, 10), (300, "a".into(), 5, 10), (300, "b".into(), 2, 10)]
        );
        assert_eq!((counted(&store)["a"], counted(&store)["b"]), (0, 2));
        assert_eq!(store.counters().series[0].requests["ok"], 10, "status counts are kept");

        // New requests are judged under the new config.
        store.ingest([record(49.0, 0.4)], now_ms);
        assert_eq!(good(&mut store, now_ms)[0], (60, "a".into(), 6, 11));
        assert_eq!(counted(&store)["a"], 1);
    }
}
