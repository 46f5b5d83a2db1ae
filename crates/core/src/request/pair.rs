//! The time a client waits outside the engine, request by request: the tap's TTFT of a
//! request minus the engine's own TTFT of the same request (docs/metrics.md#ttft-outside-the-engine).
//!
//! The engine's side comes from the tap's record itself when the response carried the
//! engine's times (vLLM's `metrics`, llama.cpp's `timings`), else from the engine's span of
//! the same request, paired by request id within the target. A tap record that cannot be
//! paired is counted with the reason, never compared with some other request: a window's
//! gap is a statistic of per-request differences, and it is absent, with its reasons, when
//! no request of the window was paired.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;

use super::ranked::Ranked;
use super::record::{RequestRecord, Source};
pub use crate::report::request::{GapReference, TtftGap};

/// How long one side of a pair waits for the other (by the store's clock): an engine exports
/// its span when the request ends, within its exporter's batch delay.
pub const PAIR_WAIT_MS: i64 = 30_000;
/// Records waiting for their other side, per side; past it a tap record is counted
/// unpaired at once and a span is not held.
pub const MAX_WAITING: usize = 65_536;
/// Paired and unpaired requests kept per target and model for the windows; the oldest go
/// first.
pub const MAX_KEPT_PER_SERIES: usize = 65_536;

/// Where the engine's side of a pair came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Partner {
    /// The engine's times in the response the tap relayed.
    Response,
    /// The engine's span of the request (OTLP), by request id.
    Otlp,
}

/// Why a tap record with a TTFT has no engine side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unpaired {
    /// The response named no request id and carried no engine times (TGI, SGLang's native
    /// route, an engine without per-request metrics).
    NoRequestId,
    /// No span with the record's request id came within [`PAIR_WAIT_MS`] (no spans are
    /// sent, or not for this request).
    NoEngineRecord,
    /// The span of the request carried no TTFT.
    EngineWithoutTtft,
}

impl Unpaired {
    pub const ALL: [Unpaired; 3] = [Unpaired::NoRequestId, Unpaired::NoEngineRecord, Unpaired::EngineWithoutTtft];

    pub fn as_str(self) -> &'static str {
        match self {
            Unpaired::NoRequestId => "no_request_id",
            Unpaired::NoEngineRecord => "no_engine_record",
            Unpaired::EngineWithoutTtft => "engine_without_ttft",
        }
    }
}

#[derive(Debug, Clone)]
struct Waiting {
    /// Tap side: the series, finish time and TTFT; engine side: its TTFT.
    model: String,
    finished: f64,
    ttft: Option<f64>,
    deadline_ms: i64,
}

/// The paired and unpaired requests of one target and model, each sorted by finish time,
/// and each window's sums over them.
#[derive(Debug, Clone, Default)]
struct Kept {
    /// (finished, gap, partner) of paired requests.
    paired: VecDeque<(f64, f64, Partner)>,
    unpaired: VecDeque<(f64, Unpaired)>,
    /// Per window (the store's window order): its sums, once it has been read.
    runs: Vec<Option<GapRun>>,
}

/// One window's sums over the kept requests that finished in `(lo, hi]`, kept as requests
/// enter and leave it (as the store's own windows are, request/running.rs), so that reading
/// a window costs the requests that moved, not the requests it holds.
#[derive(Debug, Clone)]
struct GapRun {
    lo: f64,
    hi: f64,
    quantiles: Vec<f64>,
    /// The gaps ranked, for their quantiles, least and mean; `None` in a window that reports
    /// no latency quantile (`StoreConfig::alert_only`), which then reports its counts alone.
    gaps: Option<Ranked>,
    /// The gaps' sum in units of 2⁻⁶⁴ s: an integer, so that a gap leaving takes back
    /// exactly what it added, however long the window runs (a gap of a quarter
    /// millisecond or more converts without losing a bit).
    sum: i128,
    /// Paired requests by partner: response, OTLP.
    partners: [u64; 2],
    /// Unpaired requests by reason, in [`Unpaired::ALL`]'s order.
    unpaired: [u64; 3],
}

/// Units of [`GapRun::sum`]'s fixed point per second.
const SUM_SCALE: f64 = 18_446_744_073_709_551_616.0; // 2^64

fn fixed(gap: f64) -> i128 {
    (gap * SUM_SCALE) as i128
}

impl GapRun {
    fn new(lo: f64, hi: f64, quantiles: &[f64]) -> GapRun {
        GapRun {
            lo,
            hi,
            quantiles: quantiles.to_vec(),
            gaps: (!quantiles.is_empty()).then(|| Ranked::new(quantiles)),
            sum: 0,
            partners: [0; 2],
            unpaired: [0; 3],
        }
    }

    fn inside(&self, t: f64) -> bool {
        t > self.lo && t <= self.hi
    }

    /// Counts a paired request in (`enter`) or out; returns the map steps taken.
    fn paired(&mut self, (_, gap, partner): (f64, f64, Partner), enter: bool) -> u64 {
        let slot = &mut self.partners[usize::from(partner == Partner::Otlp)];
        if enter {
            self.sum += fixed(gap);
            *slot += 1;
            self.gaps.as_mut().map_or(0, |g| g.insert(gap))
        } else {
            self.sum -= fixed(gap);
            *slot -= 1;
            self.gaps.as_mut().map_or(0, |g| g.remove(gap))
        }
    }

    fn unpaired(&mut self, (_, why): (f64, Unpaired), enter: bool) {
        let slot = &mut self.unpaired[Unpaired::ALL.iter().position(|u| *u == why).unwrap_or(0)];
        if enter {
            *slot += 1;
        } else {
            *slot -= 1;
        }
    }

    /// The mean gap. Converting the sum back rounds, and the mean of equal gaps could land
    /// an ulp outside them; the true mean lies between the least and the greatest gap.
    fn mean(&self) -> Option<f64> {
        let gaps = self.gaps.as_ref()?;
        let (min, max) = (gaps.min()?, gaps.max()?);
        Some((self.sum as f64 / SUM_SCALE / gaps.len() as f64).clamp(min, max))
    }

    /// The window's gap; `None` when the tap measured no TTFT in it, paired or not.
    fn report(&self) -> Option<TtftGap> {
        let n = self.partners.iter().sum::<u64>();
        if n == 0 && self.unpaired.iter().all(|u| *u == 0) {
            return None;
        }
        let unpaired: BTreeMap<&'static str, u64> =
            Unpaired::ALL.iter().zip(self.unpaired).map(|(u, count)| (u.as_str(), count)).collect();
        let reference = match (self.partners[0] > 0, self.partners[1] > 0) {
            (true, true) => GapReference::Both,
            (true, false) => GapReference::Response,
            (false, true) => GapReference::Otlp,
            (false, false) => GapReference::None,
        };
        let absent = (n == 0).then(|| {
            let most = unpaired.iter().max_by_key(|(_, n)| **n).map_or("", |(k, _)| *k);
            match most {
                "no_request_id" => "no request could be paired: the responses named no request id and carried no engine times",
                "engine_without_ttft" => "no request could be paired: the engine's spans carried no TTFT",
                _ => "no request could be paired: no engine span with the same request id arrived within 30 s, and the responses carried no engine times",
            }
        });
        Some(TtftGap {
            reference,
            paired: n,
            mean: self.mean(),
            min: self.gaps.as_ref().and_then(Ranked::min),
            quantiles: match &self.gaps {
                Some(gaps) if n > 0 => self.quantiles.iter().copied().zip(gaps.quantiles()).collect(),
                _ => Vec::new(),
            },
            unpaired,
            absent,
        })
    }
}

/// The first index of `v` (sorted by its first field) whose time is after `t`.
fn after<T>(v: &VecDeque<T>, t: f64, time: impl Fn(&T) -> f64) -> usize {
    v.partition_point(|e| time(e) <= t)
}

impl Kept {
    /// Keeps a paired request in finish order, counting it in the windows it falls in.
    fn keep_paired(&mut self, e: (f64, f64, Partner)) {
        let i = after(&self.paired, e.0, |p| p.0);
        self.paired.insert(i, e);
        for run in self.runs.iter_mut().flatten().filter(|r| r.inside(e.0)) {
            run.paired(e, true);
        }
        if self.paired.len() > MAX_KEPT_PER_SERIES {
            self.drop_paired();
        }
    }

    fn keep_unpaired(&mut self, e: (f64, Unpaired)) {
        let i = after(&self.unpaired, e.0, |u| u.0);
        self.unpaired.insert(i, e);
        for run in self.runs.iter_mut().flatten().filter(|r| r.inside(e.0)) {
            run.unpaired(e, true);
        }
        if self.unpaired.len() > MAX_KEPT_PER_SERIES {
            self.drop_unpaired();
        }
    }

    /// Drops the paired request that finished first, out of the windows it is in.
    fn drop_paired(&mut self) -> Option<f64> {
        let e = self.paired.pop_front()?;
        for run in self.runs.iter_mut().flatten().filter(|r| r.inside(e.0)) {
            run.paired(e, false);
        }
        Some(e.0)
    }

    fn drop_unpaired(&mut self) -> Option<f64> {
        let e = self.unpaired.pop_front()?;
        for run in self.runs.iter_mut().flatten().filter(|r| r.inside(e.0)) {
            run.unpaired(e, false);
        }
        Some(e.0)
    }

    /// Drops what finished at or before `horizon`.
    fn expire(&mut self, horizon: f64) {
        while self.paired.front().is_some_and(|p| p.0 <= horizon) {
            self.drop_paired();
        }
        while self.unpaired.front().is_some_and(|u| u.0 <= horizon) {
            self.drop_unpaired();
        }
    }

    /// Window `i`'s sums moved to `(lo, hi]`: the requests its lower edge passed leave, those
    /// its upper edge reached enter; built afresh when the window went back or jumped past
    /// itself (a clock step, a first read). Returns the requests that entered or left and
    /// the map steps they took.
    fn window(&mut self, i: usize, lo: f64, hi: f64, quantiles: &[f64]) -> (&GapRun, (u64, u64)) {
        if self.runs.len() <= i {
            self.runs.resize(i + 1, None);
        }
        let Kept { paired, unpaired, runs } = self;
        let run = &mut runs[i];
        let slides = run.as_ref().is_some_and(|r| r.lo <= lo && r.hi <= hi && lo <= r.hi && r.quantiles == quantiles);
        let (leave, enter) = match run.as_mut().filter(|_| slides) {
            Some(r) => ((r.lo, lo), (r.hi, hi)),
            None => {
                *run = Some(GapRun::new(lo, hi, quantiles));
                ((lo, lo), (lo, hi))
            }
        };
        let r = run.as_mut().expect("made above");
        let (mut moved, mut steps) = (0, 0);
        for e in paired.range(after(paired, leave.0, |p| p.0)..after(paired, leave.1, |p| p.0)) {
            (moved, steps) = (moved + 1, steps + r.paired(*e, false));
        }
        for e in paired.range(after(paired, enter.0, |p| p.0)..after(paired, enter.1, |p| p.0)) {
            (moved, steps) = (moved + 1, steps + r.paired(*e, true));
        }
        for e in unpaired.range(after(unpaired, leave.0, |u| u.0)..after(unpaired, leave.1, |u| u.0)) {
            moved += 1;
            r.unpaired(*e, false);
        }
        for e in unpaired.range(after(unpaired, enter.0, |u| u.0)..after(unpaired, enter.1, |u| u.0)) {
            moved += 1;
            r.unpaired(*e, true);
        }
        (r.lo, r.hi) = (lo, hi);
        (r, (moved, steps))
    }
}

/// Pairs tap records with the engine's view of the same request as records arrive.
#[derive(Debug, Clone, Default)]
pub struct Pairer {
    /// By (target, request id).
    tap: HashMap<(String, String), Waiting>,
    engine: HashMap<(String, String), Waiting>,
    /// Deadlines in arrival order: (deadline, tap side?, key).
    order: VecDeque<(i64, bool, (String, String))>,
    /// By (target, model).
    kept: BTreeMap<(String, String), Kept>,
}

impl Pairer {
    /// Offers a record the store took (with the model of the series it joined) at `now_ms`.
    pub fn offer(&mut self, r: &RequestRecord, now_ms: i64) {
        match r.source {
            Source::Tap => self.offer_tap(r, now_ms),
            Source::Otlp => self.offer_engine(r, now_ms),
        }
    }

    fn offer_tap(&mut self, r: &RequestRecord, now_ms: i64) {
        let Some(ttft) = r.ttft_s else { return };
        let series = (r.target.clone(), r.model.clone());
        if let Some(engine) = r.engine.and_then(|e| e.prefill_s.map(|p| p + e.queue_s.unwrap_or(0.0))) {
            return self.paired(series, r.finished_unix, ttft - engine, Partner::Response);
        }
        let Some(id) = &r.request_id else {
            return self.unpaired(series, r.finished_unix, Unpaired::NoRequestId);
        };
        let key = (r.target.clone(), id.clone());
        if let Some(e) = self.engine.remove(&key) {
            return match e.ttft {
                Some(engine) => self.paired(series, r.finished_unix, ttft - engine, Partner::Otlp),
                None => self.unpaired(series, r.finished_unix, Unpaired::EngineWithoutTtft),
            };
        }
        if self.tap.len() >= MAX_WAITING {
            return self.unpaired(series, r.finished_unix, Unpaired::NoEngineRecord);
        }
        let deadline_ms = now_ms.saturating_add(PAIR_WAIT_MS);
        let w = Waiting { model: r.model.clone(), finished: r.finished_unix, ttft: Some(ttft), deadline_ms };
        self.tap.insert(key.clone(), w);
        self.order.push_back((deadline_ms, true, key));
    }

    fn offer_engine(&mut self, r: &RequestRecord, now_ms: i64) {
        let Some(id) = &r.request_id else { return };
        let key = (r.target.clone(), id.clone());
        if let Some(t) = self.tap.remove(&key) {
            let (series, tap_ttft) = ((key.0, t.model), t.ttft.unwrap_or(f64::NAN));
            return match r.ttft_s {
                Some(engine) => self.paired(series, t.finished, tap_ttft - engine, Partner::Otlp),
                None => self.unpaired(series, t.finished, Unpaired::EngineWithoutTtft),
            };
        }
        if self.engine.len() >= MAX_WAITING {
            return;
        }
        let deadline_ms = now_ms.saturating_add(PAIR_WAIT_MS);
        let w = Waiting { model: String::new(), finished: r.finished_unix, ttft: r.ttft_s, deadline_ms };
        self.engine.insert(key.clone(), w);
        self.order.push_back((deadline_ms, false, key));
    }

    fn paired(&mut self, series: (String, String), finished: f64, gap: f64, partner: Partner) {
        if !gap.is_finite() {
            return;
        }
        self.kept.entry(series).or_default().keep_paired((finished, gap, partner));
    }

    fn unpaired(&mut self, series: (String, String), finished: f64, why: Unpaired) {
        self.kept.entry(series).or_default().keep_unpaired((finished, why));
    }

    /// Counts the tap records whose wait ended at `now_ms` as unpaired, and drops what
    /// finished at or before `horizon` (Unix seconds), which no window reads.
    pub fn expire(&mut self, now_ms: i64, horizon: f64) {
        while let Some((deadline, _, _)) = self.order.front()
            && *deadline <= now_ms
        {
            let Some((deadline, tap_side, key)) = self.order.pop_front() else { break };
            let side = if tap_side { &mut self.tap } else { &mut self.engine };
            // Paired (removed) or offered again since (a later deadline): nothing to do.
            if side.get(&key).is_none_or(|w| w.deadline_ms != deadline) {
                continue;
            }
            let Some(w) = side.remove(&key) else { continue };
            if tap_side {
                self.unpaired((key.0, w.model), w.finished, Unpaired::NoEngineRecord);
            }
        }
        self.kept.retain(|_, k| {
            k.expire(horizon);
            !(k.paired.is_empty() && k.unpaired.is_empty())
        });
    }

    /// The gap of `target`'s `model` over the requests that finished in `(from, to]`, the
    /// store's window `i`; `None` when the tap measured no TTFT there, paired or not. Also
    /// the work: the requests that entered or left the window, and their map steps.
    pub fn window(
        &mut self,
        target: &str,
        model: &str,
        i: usize,
        (from, to): (f64, f64),
        quantiles: &[f64],
    ) -> (Option<TtftGap>, (u64, u64)) {
        let Some(kept) = self.kept.get_mut(&(target.to_string(), model.to_string())) else { return (None, (0, 0)) };
        let (run, work) = kept.window(i, from, to, quantiles);
        (run.report(), work)
    }

    /// The gap over `(from, to]` read from every kept request, as the windows' sums must
    /// give it (the tests' oracle).
    #[cfg(test)]
    pub fn read_whole(&self, target: &str, model: &str, (from, to): (f64, f64), quantiles: &[f64]) -> Option<TtftGap> {
        let kept = self.kept.get(&(target.to_string(), model.to_string()))?;
        let mut run = GapRun::new(from, to, quantiles);
        for e in &kept.paired {
            if run.inside(e.0) {
                run.paired(*e, true);
            }
        }
        for e in &kept.unpaired {
            if run.inside(e.0) {
                run.unpaired(*e, true);
            }
        }
        let mut gap = run.report()?;
        // The mean as a plain sum of the gaps in the window, not through the running sum.
        let gaps: Vec<f64> = kept.paired.iter().filter(|e| e.0 > from && e.0 <= to).map(|e| e.1).collect();
        gap.mean = (!gaps.is_empty()).then(|| gaps.iter().sum::<f64>() / gaps.len() as f64);
        let mut sorted = gaps;
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len() as u64;
        gap.min = sorted.first().copied();
        gap.quantiles = if n == 0 {
            Vec::new()
        } else {
            quantiles.iter().map(|&q| (q, sorted[super::sketch::nearest_rank(q, n) as usize - 1])).collect()
        };
        Some(gap)
    }

    /// Records waiting for their other side now, both sides.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.tap.len() + self.engine.len()
    }
}
