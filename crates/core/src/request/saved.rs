//! One target's request series as a `state_dir` snapshot keeps them
//! (docs/architecture.md#state-that-survives-restarts): the raw records, the slot rings
//! and the cumulative counters, as they are.
//!
//! A series is restored only into a store that would build it the same way: the same
//! windows, and the same definitions of the SLOs that apply to it (its counters and slots
//! are per SLO). Any other series starts empty.
//!
//! The records are saved as packed bytes ([`super::compact::packed`]); snapshots written
//! before that hold them as a sequence of structs ([`LegacySavedRequests`], read, never
//! written). A snapshot encodes a target's series straight from the store
//! ([`RequestStore::saved_ref`]), without copying its records first.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::compact::Compact;
use super::record::Status;
use super::ring::Ring;
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

/// [`SavedRequests`] borrowed from the store: encodes to the same bytes.
#[derive(Debug, Serialize)]
pub struct SavedRequestsRef<'a> {
    series: Vec<SavedSeriesRef<'a>>,
}

#[derive(Debug, Serialize)]
struct SavedSeriesRef<'a> {
    key: &'a SeriesKey,
    slos: Vec<String>,
    series: &'a Series,
}

impl SavedRequests {
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }
}

impl SavedRequestsRef<'_> {
    /// About the bytes the series encode to (the records exactly, their windows' slots
    /// roughly): room to encode into without growing a buffer of megabytes step by step.
    pub fn encoded_len_hint(&self) -> usize {
        self.series
            .iter()
            .map(|s| s.series.raw.len() * super::compact::PACKED_LEN + s.series.rings.len() * 32_768)
            .sum()
    }
}

/// One target's series as snapshots written before the records were packed hold them:
/// read, never written (but by tests).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LegacySavedRequests {
    series: Vec<LegacySavedSeries>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct LegacySavedSeries {
    key: SeriesKey,
    slos: Vec<String>,
    series: LegacySeries,
}

/// [`Series`] with its records as a sequence of structs, field for field as it was saved.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LegacySeries {
    slos: Vec<usize>,
    raw: VecDeque<Compact>,
    complete_after: f64,
    rings: Vec<Ring>,
    first_started: f64,
    by_status: BTreeMap<Status, u64>,
    good: Vec<u64>,
    evicted_by_cap: u64,
}

impl From<LegacySavedRequests> for SavedRequests {
    fn from(l: LegacySavedRequests) -> SavedRequests {
        let series = l
            .series
            .into_iter()
            .map(|s| {
                let LegacySeries { slos, raw, complete_after, rings, first_started, by_status, good, evicted_by_cap } =
                    s.series;
                let series = Series {
                    slos,
                    raw,
                    complete_after,
                    rings,
                    first_started,
                    by_status,
                    good,
                    evicted_by_cap,
                    running: Vec::new(),
                };
                SavedSeries { key: s.key, slos: s.slos, series }
            })
            .collect();
        SavedRequests { series }
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

    /// Every series of `target`, copied.
    pub fn saved(&self, target: &str) -> SavedRequests {
        let series = self
            .series
            .iter()
            .filter(|(k, _)| k.target == target)
            .map(|(k, s)| SavedSeries { key: k.clone(), slos: self.slo_definitions(&s.slos), series: s.saved() })
            .collect();
        SavedRequests { series }
    }

    /// Every series of `target` as they stand, to encode while the store is held: the
    /// same bytes as [`RequestStore::saved`]'s without a copy of up to 3 MiB of records a
    /// series.
    pub fn saved_ref(&self, target: &str) -> SavedRequestsRef<'_> {
        let series = self
            .series
            .iter()
            .filter(|(k, _)| k.target == target)
            .map(|(k, s)| SavedSeriesRef { key: k, slos: self.slo_definitions(&s.slos), series: s })
            .collect();
        SavedRequestsRef { series }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{EngineTimes, RequestRecord, Source, Status, StoreConfig, TokenCount};
    use super::*;
    use crate::duration::Window;
    use crate::slo::{Objective, Scope, Slo};

    const T0_MS: i64 = 1_700_000_000_000;

    /// Two minutes of requests of every status, some without a TTFT or a token count, past
    /// the cap of 50 records: what the fixture of a snapshot before the packing was written from.
    fn store() -> RequestStore {
        let mut store = RequestStore::new(StoreConfig {
            targets: vec!["t".into()],
            windows: vec![Window::from_secs(60), Window::from_secs(300)],
            alert_only: Vec::new(),
            quantiles: vec![0.5, 0.99],
            slos: vec![Slo {
                name: "chat".into(),
                ttft: Some(Duration::from_millis(200)),
                tpot: Some(Duration::from_millis(50)),
                e2e: None,
                objective: Objective::new(0.99).unwrap(),
                scope: Scope::all(),
            }],
            max_records_per_series: 50,
            max_series_per_target: 4,
        });
        for k in 1..=24i64 {
            let now = T0_MS + k * 5_000;
            let records = (0..4i64).map(|j| {
                let n = (k * 4 + j) as usize;
                RequestRecord {
                    source: if n.is_multiple_of(3) { Source::Otlp } else { Source::Tap },
                    target: "t".into(),
                    model: "m".into(),
                    status: Status::EACH[n % 6],
                    finished_unix: (now - 5_000 + j * 1_200) as f64 / 1000.0,
                    e2e_s: 0.5 + 0.01 * n as f64,
                    ttft_s: (!n.is_multiple_of(5)).then_some(0.02 * (n % 17) as f64),
                    tpot_s: Some(0.001 * (n % 29) as f64),
                    prompt_tokens: Some(10),
                    output_tokens: (!n.is_multiple_of(7))
                        .then_some(TokenCount { value: n as u32, exact: n.is_multiple_of(2) }),
                    itl: Vec::new(),
                    engine: Some(EngineTimes { queue_s: Some(0.001), prefill_s: Some(0.01), decode_s: None }),
                    request_id: None,
                }
            });
            store.ingest(records, now);
            store.evaluate(now);
        }
        store
    }

    fn empty_like(store: &RequestStore) -> RequestStore {
        RequestStore::new(store.cfg.clone())
    }

    /// What a snapshot holds of `store`'s series (not the windows' sums, built again).
    fn bytes(store: &RequestStore) -> Vec<u8> {
        postcard::to_allocvec(&store.saved_ref("t")).unwrap()
    }

    /// `store` restored from `bytes` into a store of its config.
    fn restored(store: &RequestStore, bytes: &[u8]) -> RequestStore {
        let mut fresh = empty_like(store);
        assert_eq!(fresh.restore("t", postcard::from_bytes(bytes).unwrap()), (2, 0), "the tap's series and the spans'");
        fresh
    }

    /// Both report the same from here on.
    fn report_alike(mut a: RequestStore, mut b: RequestStore) {
        for later in [T0_MS + 125_000, T0_MS + 150_000, T0_MS + 400_000] {
            assert_eq!(format!("{:?}", a.evaluate(later)), format!("{:?}", b.evaluate(later)), "at {later}");
        }
    }

    /// [`store`]'s series as goodput wrote them before the records were packed (at
    /// 5c248f0), the bytes of the section's `Part::Requests`.
    const BEFORE_PACKING: &[u8] = include_bytes!("../../testdata/requests-before-packing.postcard");

    #[test]
    fn a_snapshot_from_before_the_packing_restores_as_it_was_saved() {
        let store = store();
        let legacy: LegacySavedRequests = postcard::from_bytes(BEFORE_PACKING).unwrap();
        let mut from_legacy = empty_like(&store);
        assert_eq!(from_legacy.restore("t", legacy.into()), (2, 0), "the tap's series and the spans'");
        assert_eq!(bytes(&from_legacy), bytes(&store));
        assert!(store.series.values().any(|s| s.evicted_by_cap > 0 && s.raw.len() == 50), "the cap was reached");
        // A restore builds the windows' sums again from the records, and starts the TTFT
        // gap's pairs afresh (docs/metrics.md): alike whichever form the records came in.
        report_alike(from_legacy, restored(&store, &bytes(&store)));
    }

    #[test]
    fn the_borrowed_form_encodes_to_the_bytes_of_the_copy_and_restores_the_series() {
        let store = store();
        let saved = bytes(&store);
        assert_eq!(saved, postcard::to_allocvec(&store.saved("t")).unwrap());
        let records: usize = store.series.values().map(|s| s.raw.len()).sum();
        assert!(saved.len() > records * super::super::compact::PACKED_LEN, "{} bytes, {records} records", saved.len());
        assert_eq!(bytes(&restored(&store, &saved)), saved);
    }
}
