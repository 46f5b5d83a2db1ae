//! One target's request series as a `state_dir` snapshot keeps them
//! (docs/architecture.md#state-that-survives-restarts): the raw records, the slot rings
//! and the cumulative counters, as they are.
//!
//! A series is restored only into a store that would build it the same way: the same
//! windows, and the same definitions of the SLOs that apply to it (its counters and slots
//! are per SLO). Any other series starts empty.

use serde::{Deserialize, Serialize};

use super::store::{RequestStore, Series, SeriesKey};

/// One target's series.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedRequests {
    series: Vec<SavedSeries>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedSeries {
    key: SeriesKey,
    /// The definitions of the SLOs the series judged, in its order.
    slos: Vec<String>,
    series: Series,
}

impl SavedRequests {
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }
}

impl RequestStore {
    /// The definitions of the SLOs `key` judges in this store, in the series' order.
    fn slo_definitions(&self, slos: &[usize]) -> Vec<String> {
        slos.iter().map(|&i| format!("{:?}", self.cfg.slos[i])).collect()
    }

    /// Whether `target` has a request series to save.
    pub fn holds(&self, target: &str) -> bool {
        self.series.keys().any(|k| k.target == target)
    }

    /// Every series of `target`.
    pub fn saved(&self, target: &str) -> SavedRequests {
        let series = self
            .series
            .iter()
            .filter(|(k, _)| k.target == target)
            .map(|(k, s)| SavedSeries { key: k.clone(), slos: self.slo_definitions(&s.slos), series: s.saved() })
            .collect();
        SavedRequests { series }
    }

    /// Takes back the saved series of `target` that this store would build the same way;
    /// returns how many were taken and how many were dropped. Series the store already
    /// has are kept as they are.
    pub fn restore(&mut self, target: &str, saved: SavedRequests) -> (usize, usize) {
        let (mut taken, mut dropped) = (0, 0);
        for s in saved.series {
            let fresh = self.new_series(&s.key);
            let windows_match = s.series.rings.len() == fresh.rings.len()
                && s.series.rings.iter().zip(&fresh.rings).all(|(a, b)| a.window_ms() == b.window_ms());
            let same = s.key.target == target
                && self.cfg.targets.iter().any(|t| t == target)
                && fresh.slos == s.series.slos
                && self.slo_definitions(&fresh.slos) == s.slos
                && s.series.good.len() == fresh.slos.len()
                && windows_match;
            let of_target = self.series.keys().filter(|k| k.target == target && !k.model.is_empty()).count();
            if !same || (!s.key.model.is_empty() && of_target >= self.cfg.max_series_per_target) {
                dropped += 1;
                continue;
            }
            self.series.entry(s.key).or_insert(s.series);
            taken += 1;
        }
        (taken, dropped)
    }
}
