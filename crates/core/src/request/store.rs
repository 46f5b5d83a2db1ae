//! The request store: per target, model and source, what the windows need, in bounded
//! memory (docs/limits.md#request-store).
//!
//! Each series keeps
//! - its most recent requests as [`Compact`] records (48 bytes each), up to
//!   [`StoreConfig::max_records_per_series`] and no older than the longest window: a window
//!   they cover is evaluated exactly over `(t − w, t]`, quantiles included;
//! - per window, a [`Ring`] of 120-odd time slots with exact counts and latency sketches, for
//!   a window the records no longer cover once the cap pushed some out (a flood);
//! - cumulative counters by status and by SLO, never evicted.
//!
//! A flood cannot grow it: records past the cap push the oldest out, slots are fixed in
//! number per window, sketches are capped in bins, and the number of series per target is
//! capped. A client cannot take those series either: a record keeps its own model only when
//! the target is known to serve it ([`super::attribute`]), the others share `model=""`, and
//! a new series of a served model pushes out the least recently seen one.

use std::collections::{BTreeMap, VecDeque};

use super::attribute::{Known, unattributed};
use super::compact::Compact;
use super::judge::{Judgement, Verdict, judge};
use super::pair::Pairer;
use super::record::{RequestRecord, Source, Status};
use super::reject::Reject;
use super::ring::{Ring, edge};
use super::running::{Running, Work};
use super::sketch;
use crate::duration::Window;
use crate::slo::Slo;

/// Records kept per series for exact windows: 3 MiB of [`Compact`]s. At 1,000 requests/s
/// that is the last minute; past it, windows are evaluated from slots.
pub const DEFAULT_MAX_RECORDS_PER_SERIES: usize = 65_536;
/// Model and source pairs per target, besides the two of `model=""`: a LoRA fleet names a
/// few dozen models.
pub const DEFAULT_MAX_SERIES_PER_TARGET: usize = 64;
/// A record may finish this far in the daemon's future (another host's clock, e.g. an
/// engine's span); further is refused as [`Reject::Future`].
pub const MAX_CLOCK_SKEW_MS: i64 = 10_000;

/// What the store evaluates, and its bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    /// The configured targets' names: records for others are refused.
    pub targets: Vec<String>,
    pub windows: Vec<Window>,
    /// The latency quantiles reported for each window, but those of `alert_only`.
    pub quantiles: Vec<f64>,
    /// The windows evaluated only for the alert rules, each with the quantiles the rules
    /// read of it (none unless a latency rule does): no others are reported there, as for
    /// the histograms' alert-only windows (docs/metrics.md#alert-only-windows), and a
    /// window without any keeps no latencies in its running sums.
    pub alert_only: Vec<(Window, Vec<f64>)>,
    /// Every configured SLO; each series judges those whose scope covers it.
    pub slos: Vec<Slo>,
    pub max_records_per_series: usize,
    /// Series per target besides those of `model=""`; past it the least recently seen goes.
    pub max_series_per_target: usize,
}

impl StoreConfig {
    /// The window whose records the report lists by arrival
    /// ([`RequestSlo::by_arrival`](crate::report::request::RequestSlo::by_arrival)): the one
    /// the capacity book reads ([`ModelReport::primary_window`](crate::report::ModelReport::primary_window)),
    /// the shortest that is not alert-only. `None` when every window is.
    pub fn arrival_window(&self) -> Option<Window> {
        self.windows.iter().filter(|w| !self.alert_only.iter().any(|(a, _)| a == *w)).min().copied()
    }

    /// The latency quantiles window `w` reports.
    pub fn quantiles_at(&self, w: Window) -> &[f64] {
        self.alert_only.iter().find(|(a, _)| *a == w).map_or(&self.quantiles, |(_, q)| q)
    }
}

/// One target, model and source.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct SeriesKey {
    pub target: String,
    pub model: String,
    pub source: Source,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Series {
    /// Indices into [`StoreConfig::slos`] of the SLOs that apply, in config order.
    pub slos: Vec<usize>,
    /// Sorted by `finished`. Saved as packed bytes ([`super::compact::packed`]).
    #[serde(with = "super::compact::packed")]
    pub raw: VecDeque<Compact>,
    /// The latest finish time of a record the cap pushed out: windows starting at or after
    /// it are whole in `raw`.
    pub complete_after: f64,
    /// One per [`StoreConfig::windows`], in their order.
    pub rings: Vec<Ring>,
    /// When the first request this series saw began (for coverage).
    pub first_started: f64,
    pub by_status: BTreeMap<Status, u64>,
    /// Per SLO of `slos`: requests jointly good (judged by the measured values).
    pub good: Vec<u64>,
    pub evicted_by_cap: u64,
    /// Per window, its running sums while the records cover it ([`Running`]): not saved,
    /// built again from the records at the first evaluation that needs them.
    #[serde(skip)]
    pub running: Vec<Option<Running>>,
}

impl Series {
    /// A copy for a snapshot: everything but the running sums, which are not saved.
    pub fn saved(&self) -> Series {
        Series {
            slos: self.slos.clone(),
            raw: self.raw.clone(),
            complete_after: self.complete_after,
            rings: self.rings.clone(),
            first_started: self.first_started,
            by_status: self.by_status.clone(),
            good: self.good.clone(),
            evicted_by_cap: self.evicted_by_cap,
            running: Vec::new(),
        }
    }
}

/// Bytes one stored request takes in the raw tier.
pub const BYTES_PER_RECORD: usize = std::mem::size_of::<Compact>();

#[derive(Debug, Clone)]
pub struct RequestStore {
    pub(super) cfg: StoreConfig,
    pub(super) series: BTreeMap<SeriesKey, Series>,
    pub(super) rejected: BTreeMap<Reject, u64>,
    /// Per target: the models it is known to serve ([`RequestStore::set_models`]).
    known: BTreeMap<String, Known>,
    /// Per target: series pushed out to make room for another.
    pub(super) series_evicted: BTreeMap<String, u64>,
    /// When a record last joined each series, in records taken so far (`taken`): the least
    /// recently seen series is the one pushed out for a new one. Not saved: a restored
    /// series counts as seen long ago.
    last_seen: BTreeMap<SeriesKey, u64>,
    taken: u64,
    pub(super) max_window_ms: i64,
    /// Tap records paired with the engine's view of the same request, for the TTFT gap.
    /// Not saved: after a restart the gap starts again from the requests that follow.
    pub(super) pairs: Pairer,
    /// What the store's updates and evaluations took since it was made.
    pub(super) work: Work,
}

impl RequestStore {
    pub fn new(cfg: StoreConfig) -> RequestStore {
        let max_window_ms = cfg.windows.iter().map(|w| w.millis()).max().unwrap_or(0);
        RequestStore {
            cfg,
            series: BTreeMap::new(),
            rejected: BTreeMap::new(),
            known: BTreeMap::new(),
            series_evicted: BTreeMap::new(),
            last_seen: BTreeMap::new(),
            taken: 0,
            max_window_ms,
            pairs: Pairer::default(),
            work: Work::default(),
        }
    }

    pub fn config(&self) -> &StoreConfig {
        &self.cfg
    }

    /// What `target` is known to serve from now on: its `model` setting and the models its
    /// latest evaluation found in its scrapes (none while it has not been scraped). Records
    /// naming another model are counted under `model=""` ([`super::attribute`]).
    pub fn set_models(&mut self, target: &str, configured: &str, scraped: impl IntoIterator<Item = String>) {
        if !self.cfg.targets.iter().any(|t| t == target) {
            return;
        }
        let known = Known { configured: configured.to_string(), scraped: scraped.into_iter().collect() };
        self.known.insert(target.to_string(), known);
    }

    /// Takes records measured up to `now_ms` (Unix ms), then drops what no window from
    /// `now_ms` on reads. Returns the records taken, each with the model of the series it
    /// joined (`""` for those whose model was refused).
    pub fn ingest(&mut self, records: impl IntoIterator<Item = RequestRecord>, now_ms: i64) -> Vec<RequestRecord> {
        let mut taken = Vec::new();
        for mut r in records {
            match self.add(&mut r, now_ms) {
                Ok(()) => {
                    self.pairs.offer(&r, now_ms);
                    taken.push(r);
                }
                Err(why) => *self.rejected.entry(why).or_default() += 1,
            }
        }
        self.evict(now_ms);
        self.pairs.expire(now_ms, edge(now_ms.saturating_sub(self.max_window_ms)));
        taken
    }

    fn add(&mut self, r: &mut RequestRecord, now_ms: i64) -> Result<(), Reject> {
        if !self.cfg.targets.contains(&r.target) {
            return Err(Reject::UnknownTarget);
        }
        let c = Compact::of(r)?;
        if c.finished > edge(now_ms.saturating_add(MAX_CLOCK_SKEW_MS)) {
            return Err(Reject::Future);
        }
        let has_series = || {
            [Source::Tap, Source::Otlp].into_iter().any(|source| {
                let key = SeriesKey { target: r.target.clone(), model: r.model.clone(), source };
                self.series.contains_key(&key)
            })
        };
        if let Some(why) = unattributed(r, self.known.get(&r.target), has_series) {
            r.model = String::new();
            *self.rejected.entry(why).or_default() += 1;
        }
        let key = SeriesKey { target: r.target.clone(), model: r.model.clone(), source: r.source };
        if !self.series.contains_key(&key) {
            self.make_room(&key.target, &key.model);
            let s = self.new_series(&key);
            self.series.insert(key.clone(), s);
        }
        let horizon = edge(now_ms.saturating_sub(self.max_window_ms));
        let cap = self.cfg.max_records_per_series;
        self.taken += 1;
        let cfg = &self.cfg;
        let Some(s) = self.series.get_mut(&key) else { return Ok(()) };
        self.last_seen.insert(key, self.taken);
        let judgements: Vec<Judgement> = s.slos.iter().map(|&i| judge(&c, &cfg.slos[i])).collect();
        *s.by_status.entry(c.status).or_default() += 1;
        for (g, j) in s.good.iter_mut().zip(&judgements) {
            *g += u64::from(j.joint == Verdict::Good);
        }
        s.first_started = s.first_started.min(c.started());
        // Each ring keeps what its slot-aligned window reads, which may start before
        // `now − w`; the raw records need only `(now − w, now]`.
        let itl = itl_bins(r);
        for ring in &mut s.rings {
            ring.add(&c, &judgements, &itl, now_ms);
        }
        if c.finished <= horizon {
            return Ok(()); // counted, but behind every window
        }
        // At the cap the oldest record goes before the new one comes in, so that the ring
        // never holds one past the cap (a deque one past a power of two doubles its buffer).
        // A new record older than every one held is itself the oldest.
        let slos: Vec<&Slo> = s.slos.iter().map(|&i| &cfg.slos[i]).collect();
        if s.raw.len() >= cap {
            if s.raw.front().is_none_or(|f| c.finished < f.finished) {
                s.complete_after = s.complete_after.max(c.finished);
                s.evicted_by_cap += 1;
                return Ok(());
            }
            if let Some(out) = s.raw.pop_front() {
                s.complete_after = s.complete_after.max(out.finished);
                s.evicted_by_cap += 1;
                self.work.records += 1;
                for r in s.running.iter_mut().flatten().filter(|r| r.covers(out.finished)) {
                    r.change(&out, &slos, false, &mut self.work);
                }
            }
        }
        let at = s.raw.partition_point(|x| x.finished <= c.finished);
        s.raw.insert(at, c);
        self.work.records += 1;
        for r in s.running.iter_mut().flatten().filter(|r| r.covers(c.finished)) {
            r.change(&c, &slos, true, &mut self.work);
        }
        Ok(())
    }

    /// Pushes out series of `target` until a new one of `model` fits under the cap: the
    /// least recently seen, of a model the target is not known to serve first. The two
    /// series of `model=""` are outside the cap, and never pushed out.
    fn make_room(&mut self, target: &str, model: &str) {
        if model.is_empty() {
            return;
        }
        let cap = self.cfg.max_series_per_target.max(1);
        let known = self.known.get(target);
        loop {
            let of_target = self.series.keys().filter(|k| k.target == target && !k.model.is_empty());
            let ranked: Vec<(&SeriesKey, (bool, u64))> = of_target
                .map(|k| {
                    (k, (known.is_some_and(|kn| kn.serves(&k.model)), self.last_seen.get(k).copied().unwrap_or(0)))
                })
                .collect();
            if ranked.len() < cap {
                return;
            }
            let Some(victim) = ranked.into_iter().min_by_key(|(_, rank)| *rank).map(|(k, _)| k.clone()) else { return };
            self.series.remove(&victim);
            self.last_seen.remove(&victim);
            *self.series_evicted.entry(target.to_string()).or_default() += 1;
        }
    }

    pub(super) fn new_series(&self, key: &SeriesKey) -> Series {
        let slos: Vec<usize> =
            (0..self.cfg.slos.len()).filter(|&i| self.cfg.slos[i].applies_to(&key.target, &key.model)).collect();
        Series {
            good: vec![0; slos.len()],
            slos,
            raw: VecDeque::new(),
            complete_after: f64::NEG_INFINITY,
            rings: self.cfg.windows.iter().map(|&w| Ring::new(w)).collect(),
            first_started: f64::INFINITY,
            by_status: BTreeMap::new(),
            evicted_by_cap: 0,
            running: Vec::new(),
        }
    }

    /// Drops records and slots no window from `now_ms` on reads.
    pub fn evict(&mut self, now_ms: i64) {
        let horizon = edge(now_ms.saturating_sub(self.max_window_ms));
        let cfg = &self.cfg;
        for s in self.series.values_mut() {
            let slos: Vec<&Slo> = s.slos.iter().map(|&i| &cfg.slos[i]).collect();
            while let Some(out) = s.raw.front().copied().filter(|c| c.finished <= horizon) {
                s.raw.pop_front();
                self.work.records += 1;
                for r in s.running.iter_mut().flatten().filter(|r| r.covers(out.finished)) {
                    r.change(&out, &slos, false, &mut self.work);
                }
            }
            for ring in &mut s.rings {
                ring.evict(now_ms);
            }
        }
    }

    /// Records held in the raw tier, over every series.
    pub fn records_held(&self) -> usize {
        self.series.values().map(|s| s.raw.len()).sum()
    }

    /// An estimate of the bytes held: records, slots and sketches (map overheads aside).
    pub fn bytes_held(&self) -> usize {
        self.series
            .values()
            .map(|s| s.raw.capacity() * BYTES_PER_RECORD + s.rings.iter().map(|r| r.footprint().1).sum::<usize>())
            .sum()
    }

    /// Bytes the windows' running sums hold ([`Running`]), estimated.
    pub fn running_bytes(&self) -> usize {
        self.series.values().flat_map(|s| s.running.iter().flatten()).map(Running::heap_bytes).sum()
    }

    /// What the store's updates and evaluations took since it was made ([`Work`]).
    pub fn work(&self) -> Work {
        self.work
    }

    /// Slots held over every series and window.
    pub fn slots_held(&self) -> usize {
        self.series.values().flat_map(|s| &s.rings).map(|r| r.footprint().0).sum()
    }
}

/// A request's ITL gaps as sketch bins, one observation per token-bearing event (the
/// event-level convention of vLLM's histogram), so that each window's ring merges a few
/// dozen bins rather than inserting every gap.
fn itl_bins(r: &RequestRecord) -> Vec<(Option<i32>, u32)> {
    let mut keys: Vec<Option<i32>> =
        r.itl.iter().filter(|g| g.seconds.is_finite() && g.seconds >= 0.0).map(|g| sketch::key(g.seconds)).collect();
    keys.sort_unstable();
    let mut out: Vec<(Option<i32>, u32)> = Vec::new();
    for k in keys {
        match out.last_mut() {
            Some(last) if last.0 == k => last.1 += 1,
            _ => out.push((k, 1)),
        }
    }
    out
}
