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
//! capped (a client naming a new model in every request cannot add series without end).

use std::collections::{BTreeMap, VecDeque};

use super::compact::{Compact, Invalid};
use super::judge::{Judgement, Verdict, judge};
use super::record::{RequestRecord, Source, Status};
use super::ring::{Ring, edge};
use super::sketch;
use crate::duration::Window;
use crate::slo::Slo;

/// Records kept per series for exact windows: 3 MiB of [`Compact`]s. At 1,000 requests/s
/// that is the last minute; past it, windows are evaluated from slots.
pub const DEFAULT_MAX_RECORDS_PER_SERIES: usize = 65_536;
/// Model and source pairs per target: a LoRA fleet names a few dozen models.
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
    pub quantiles: Vec<f64>,
    /// Every configured SLO; each series judges those whose scope covers it.
    pub slos: Vec<Slo>,
    pub max_records_per_series: usize,
    pub max_series_per_target: usize,
}

/// Why the store refused a record (it is then in no window and no counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reject {
    /// The record names a target the config does not have.
    UnknownTarget,
    /// The target already has [`StoreConfig::max_series_per_target`] model and source pairs.
    TooManySeries,
    /// An impossible number (see [`Invalid`]).
    Invalid,
    /// Finished more than [`MAX_CLOCK_SKEW_MS`] after the daemon's now.
    Future,
}

impl Reject {
    pub const ALL: [Reject; 4] = [Reject::UnknownTarget, Reject::TooManySeries, Reject::Invalid, Reject::Future];

    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Reject::UnknownTarget => "unknown_target",
            Reject::TooManySeries => "too_many_series",
            Reject::Invalid => "invalid",
            Reject::Future => "future",
        }
    }
}

impl From<Invalid> for Reject {
    fn from(_: Invalid) -> Reject {
        Reject::Invalid
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
    /// Sorted by `finished`.
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
}

/// Bytes one stored request takes in the raw tier.
pub const BYTES_PER_RECORD: usize = std::mem::size_of::<Compact>();

#[derive(Debug, Clone)]
pub struct RequestStore {
    pub(super) cfg: StoreConfig,
    pub(super) series: BTreeMap<SeriesKey, Series>,
    pub(super) rejected: BTreeMap<Reject, u64>,
    max_window_ms: i64,
}

impl RequestStore {
    pub fn new(cfg: StoreConfig) -> RequestStore {
        let max_window_ms = cfg.windows.iter().map(|w| w.millis()).max().unwrap_or(0);
        RequestStore { cfg, series: BTreeMap::new(), rejected: BTreeMap::new(), max_window_ms }
    }

    pub fn config(&self) -> &StoreConfig {
        &self.cfg
    }

    /// Takes records measured up to `now_ms` (Unix ms), then drops what no window from
    /// `now_ms` on reads.
    pub fn ingest(&mut self, records: impl IntoIterator<Item = RequestRecord>, now_ms: i64) {
        for r in records {
            if let Err(why) = self.add(&r, now_ms) {
                *self.rejected.entry(why).or_default() += 1;
            }
        }
        self.evict(now_ms);
    }

    fn add(&mut self, r: &RequestRecord, now_ms: i64) -> Result<(), Reject> {
        if !self.cfg.targets.contains(&r.target) {
            return Err(Reject::UnknownTarget);
        }
        let c = Compact::of(r)?;
        if c.finished > edge(now_ms.saturating_add(MAX_CLOCK_SKEW_MS)) {
            return Err(Reject::Future);
        }
        let key = SeriesKey { target: r.target.clone(), model: r.model.clone(), source: r.source };
        if !self.series.contains_key(&key) {
            let of_target = self.series.keys().filter(|k| k.target == key.target).count();
            if of_target >= self.cfg.max_series_per_target {
                return Err(Reject::TooManySeries);
            }
            let s = self.new_series(&key);
            self.series.insert(key.clone(), s);
        }
        let horizon = edge(now_ms.saturating_sub(self.max_window_ms));
        let cap = self.cfg.max_records_per_series;
        let cfg = &self.cfg;
        let Some(s) = self.series.get_mut(&key) else { return Ok(()) };
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
        let at = s.raw.partition_point(|x| x.finished <= c.finished);
        s.raw.insert(at, c);
        if s.raw.len() > cap
            && let Some(out) = s.raw.pop_front()
        {
            s.complete_after = s.complete_after.max(out.finished);
            s.evicted_by_cap += 1;
        }
        Ok(())
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
        }
    }

    /// Drops records and slots no window from `now_ms` on reads.
    pub fn evict(&mut self, now_ms: i64) {
        let horizon = edge(now_ms.saturating_sub(self.max_window_ms));
        for s in self.series.values_mut() {
            while s.raw.front().is_some_and(|c| c.finished <= horizon) {
                s.raw.pop_front();
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
