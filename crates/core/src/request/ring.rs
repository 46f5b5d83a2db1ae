//! One window's time slots: the tallies and latency sketches of the requests that finished
//! in each slot, for windows the raw records no longer cover (docs/architecture.md#request-windows).
//!
//! A window of `w` is cut into `n` slots of `w / n` whole milliseconds, `n` the smallest
//! divisor of `w` in milliseconds from [`SLOTS_PER_WINDOW`] up (every whole-second window
//! has one: 125 divides 1000). Slot `k` holds the requests with `finished_unix` in
//! `(k·s, (k+1)·s]`, slot edges on the Unix epoch's grid. Evaluated at `t`, the window is
//! the last `n` whole slots, `(E − w, E]` with `E = ⌊t/s⌋·s`: the counts over it are
//! exact, and it ends at most one slot (`w/120`) before `t`.
//!
//! The ring keeps that sum as the window moves ([`Summed`]): a tick adds the slots that
//! became whole and takes out those that left, rather than merging all `n` again, and a
//! late request joins the sum with its slot. Sketch bins are summed without collapsing
//! ([`SketchSum`]) so that a slot can be taken out exactly.

use std::collections::BTreeMap;

use super::compact::Compact;
use super::judge::Judgement;
use super::sketch::{self, MAX_BINS, Sketch, SketchSum};
use super::tally::Tally;
use crate::duration::Window;

/// Slots per window, at least: a slots-based window lags `t` by under `w / 120`.
pub const SLOTS_PER_WINDOW: i64 = 120;

/// The latency sketches of a slot, in [`crate::window::LATENCY_HISTOGRAMS`] order
/// (TTFT, TPOT, ITL, E2E).
pub type Sketches = [Sketch; 4];

/// What one request adds to its slot's latency sketches: (index in [`Sketches`], bin, count)
/// for its TTFT, TPOT and E2E, and its ITL gaps already binned (`itl`).
fn sketch_bins<'a>(r: &Compact, itl: &'a [(Option<i32>, u32)]) -> impl Iterator<Item = (usize, Option<i32>, u32)> + 'a {
    let one = [(0, r.ttft()), (1, r.tpot()), (3, Some(r.e2e))];
    let values = one.into_iter().filter_map(|(i, v)| v.map(|v| (i, sketch::key(v), 1)));
    values.chain(itl.iter().map(|&(key, n)| (2, key, n)))
}

/// Bins a window's summed sketch keeps between evaluations, at most: four sketches' worth.
pub const MAX_SUM_BINS: usize = 4 * MAX_BINS;

/// A window edge in Unix seconds. Raw-record windows and slot edges both use it, so a
/// record exactly on an edge falls on the same side in both.
pub fn edge(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Slot {
    pub tally: Tally,
    pub sketches: Sketches,
}

impl Slot {
    fn heap_bytes(&self) -> usize {
        self.tally.heap_bytes() + self.sketches.iter().map(Sketch::heap_bytes).sum::<usize>()
    }
}

/// A window's sum over its slots.
#[derive(Debug, Clone)]
pub struct SlotWindow {
    pub from_ms: i64,
    pub to_ms: i64,
    pub tally: Tally,
    pub sketches: Sketches,
    /// Slots added to or taken out of the sum (at most the window's slot count) and the
    /// sketches among them: the work it took.
    pub merged: usize,
    pub sketches_merged: usize,
}

/// What a window reads of its slots ([`Ring::window`]): their tally, and which latency
/// sketches, in [`Sketches`] order. What it does not read is left empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reads {
    pub tally: bool,
    pub sketches: [bool; 4],
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Ring {
    window_ms: i64,
    width_ms: i64,
    n: i64,
    slots: BTreeMap<i64, Slot>,
    /// The window's slots summed at its last evaluation; not saved, summed again from the
    /// slots at the first evaluation after a restore.
    #[serde(skip)]
    summed: Option<Summed>,
}

/// What the ring holds of the slots with keys in `[lo, hi)`, summed: the parts `reads` names.
#[derive(Debug, Clone)]
struct Summed {
    lo: i64,
    hi: i64,
    reads: Reads,
    tally: Tally,
    sketches: [SketchSum; 4],
}

impl Summed {
    /// Adds (`enter`) or takes out one slot; returns the sketches that took.
    fn change(&mut self, slot: &Slot, enter: bool) -> usize {
        if self.reads.tally {
            if enter {
                self.tally.merge(&slot.tally);
            } else {
                self.tally.subtract(&slot.tally);
            }
        }
        let mut n = 0;
        for ((sum, s), read) in self.sketches.iter_mut().zip(&slot.sketches).zip(self.reads.sketches) {
            if read {
                if enter {
                    sum.add(s);
                } else {
                    sum.subtract(s);
                }
                n += 1;
            }
        }
        n
    }
}

/// How many slots a window of `w_ms` is cut into (see the module doc).
pub fn slots_for(w_ms: i64) -> i64 {
    if w_ms <= SLOTS_PER_WINDOW {
        return w_ms.max(1);
    }
    // Odd lengths (`1009ms`) fall back to 1 ms slots while that stays small, else to fewer,
    // longer slots: the window then lags `t` by up to one of them.
    (SLOTS_PER_WINDOW..=8 * SLOTS_PER_WINDOW).find(|n| w_ms % n == 0).unwrap_or_else(|| {
        if w_ms <= 100 * SLOTS_PER_WINDOW {
            w_ms
        } else {
            (1..SLOTS_PER_WINDOW).rev().find(|n| w_ms % n == 0).unwrap_or(1)
        }
    })
}

impl Ring {
    /// The window's length: a restored ring must be for the same window.
    pub fn window_ms(&self) -> i64 {
        self.window_ms
    }

    pub fn new(window: Window) -> Ring {
        let window_ms = window.millis().max(1);
        let n = slots_for(window_ms);
        Ring { window_ms, width_ms: window_ms / n, n, slots: BTreeMap::new(), summed: None }
    }

    pub fn width_ms(&self) -> i64 {
        self.width_ms
    }

    /// The slot holding `finished`: `k` with `edge(k·s) < finished ≤ edge((k+1)·s)`.
    fn key(&self, finished: f64) -> i64 {
        let s = self.width_ms;
        let mut k = (finished * 1000.0 / s as f64).ceil() as i64 - 1;
        while finished <= edge(k * s) {
            k -= 1;
        }
        while finished > edge((k + 1) * s) {
            k += 1;
        }
        k
    }

    /// The oldest slot any window at or after `now_ms` reads.
    fn oldest(&self, now_ms: i64) -> i64 {
        now_ms.div_euclid(self.width_ms) - self.n
    }

    /// Adds one request (and its ITL gaps as sketch bins) unless its slot is already
    /// behind every window from `now_ms` on.
    pub fn add(&mut self, r: &Compact, judgements: &[Judgement], itl: &[(Option<i32>, u32)], now_ms: i64) {
        // Checked on the time first, so that a finish time from long ago (or a wild one)
        // never reaches the slot arithmetic.
        let oldest = self.oldest(now_ms);
        if r.finished <= edge(oldest * self.width_ms) {
            return;
        }
        let k = self.key(r.finished);
        if k < oldest {
            return;
        }
        let slot =
            self.slots.entry(k).or_insert_with(|| Slot { tally: Tally::new(judgements.len()), ..Slot::default() });
        slot.tally.add(r, judgements);
        for (i, key, n) in sketch_bins(r, itl) {
            slot.sketches[i].add_key(key, n);
        }
        // A late request, into a slot the window has summed already.
        if let Some(sum) = self.summed.as_mut().filter(|s| (s.lo..s.hi).contains(&k)) {
            if sum.reads.tally {
                sum.tally.add(r, judgements);
            }
            for (i, key, n) in sketch_bins(r, itl).filter(|(i, _, _)| sum.reads.sketches[*i]) {
                sum.sketches[i].add_key(key, n);
            }
        }
    }

    /// Drops the slots no window from `now_ms` on reads, taking out of the sum those it holds.
    pub fn evict(&mut self, now_ms: i64) {
        let oldest = self.oldest(now_ms);
        if let Some(sum) = self.summed.as_mut().filter(|s| s.lo < oldest) {
            let to = oldest.min(sum.hi);
            if sum.lo < to {
                for slot in self.slots.range(sum.lo..to).map(|(_, s)| s) {
                    sum.change(slot, false);
                }
            }
            sum.lo = oldest;
            sum.hi = sum.hi.max(oldest);
        }
        self.slots = self.slots.split_off(&oldest);
    }

    /// The window's whole slots at `now_ms`, summed: only what `reads` names, so that a
    /// window the records cover sums its ITL sketches alone, and one reporting no latency
    /// quantile no sketch. The sum of the last evaluation is moved (module doc) when it has
    /// the same parts and the window has not moved back; else it is summed afresh.
    pub fn window(&mut self, now_ms: i64, slos: usize, reads: Reads) -> SlotWindow {
        let e = now_ms.div_euclid(self.width_ms);
        let (lo, hi) = (e - self.n, e);
        let to_ms = e * self.width_ms;
        let from_ms = to_ms - self.window_ms;
        if !reads.tally && !reads.sketches.contains(&true) {
            self.summed = None;
            let (tally, sketches) = (Tally::new(slos), Sketches::default());
            return SlotWindow { from_ms, to_ms, tally, sketches, merged: 0, sketches_merged: 0 };
        }
        let fresh = || Summed { lo, hi: lo, reads, tally: Tally::new(slos), sketches: Default::default() };
        let sum = match self.summed.take() {
            // Moved, when that takes fewer slots than summing afresh.
            Some(s)
                if s.reads == reads
                    && s.tally.slos.len() == slos
                    && s.lo <= lo
                    && s.hi <= hi
                    && (lo - s.lo) + (hi - s.hi) < self.n =>
            {
                s
            }
            _ => fresh(),
        };
        let sum = self.summed.insert(sum);
        let (mut merged, mut sketches_merged) = (0, 0);
        // Out: what the lower edge passed; in: what the upper edge reached.
        for (from, to, enter) in [(sum.lo, lo.min(sum.hi), false), (sum.hi.max(lo), hi, true)] {
            if from < to {
                for slot in self.slots.range(from..to).map(|(_, s)| s) {
                    merged += 1;
                    sketches_merged += sum.change(slot, enter);
                }
            }
        }
        (sum.lo, sum.hi) = (lo, hi);
        let tally = if reads.tally { sum.tally.clone() } else { Tally::new(slos) };
        let sketches =
            std::array::from_fn(|k| if reads.sketches[k] { sum.sketches[k].sketch() } else { Sketch::default() });
        // A sum does not collapse, so it holds every bin its slots hold: values spread over
        // more than MAX_SUM_BINS bins (only a producer's wild numbers do that) are summed
        // afresh at each evaluation instead, so the memory kept stays bounded.
        if sum.sketches.iter().any(|s| s.bins() > MAX_SUM_BINS) {
            self.summed = None;
        }
        SlotWindow { from_ms, to_ms, tally, sketches, merged, sketches_merged }
    }

    /// Forgets the sum, so that the next evaluation sums the slots afresh.
    #[cfg(test)]
    pub(super) fn forget_sum(&mut self) {
        self.summed = None;
    }

    /// Slots held, and the bytes they take (an estimate: map nodes are not counted).
    pub fn footprint(&self) -> (usize, usize) {
        let per = std::mem::size_of::<(i64, Slot)>();
        let sum = self.summed.as_ref().map_or(0, |s| {
            std::mem::size_of::<Summed>()
                + s.tally.heap_bytes()
                + s.sketches.iter().map(SketchSum::heap_bytes).sum::<usize>()
        });
        (self.slots.len(), self.slots.values().map(|s| per + s.heap_bytes()).sum::<usize>() + sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Window;

    #[test]
    fn slot_counts_divide_the_window() {
        for (w, n) in [(60_000, 120), (300_000, 120), (3_600_000, 120), (21_600_000, 120), (250, 125), (7, 7)] {
            assert_eq!(slots_for(w), n, "{w}");
            assert_eq!(w % slots_for(w), 0);
        }
        // 1009 ms is prime: one slot per millisecond.
        assert_eq!(slots_for(1_009), 1_009);
    }

    /// docs/limits.md#request-store quotes these sizes.
    #[test]
    fn a_slot_is_as_big_as_documented() {
        assert_eq!(std::mem::size_of::<(i64, Slot)>(), 240);
        assert_eq!(std::mem::size_of::<crate::request::SloCounts>(), 144);
    }

    /// Wild values (1 ns to 10^290 s) spread a window's slots over thousands of bins: the
    /// window is summed afresh at each evaluation rather than keeping a sum that large, and
    /// reads what merging its slots one by one gives, as a moved sum does.
    #[test]
    fn a_sum_past_its_bins_is_not_kept() {
        use crate::request::{RequestRecord, Source, Status};
        let all = Reads { tally: true, sketches: [true; 4] };
        let record = |finished: f64, ttft: f64| {
            let r = RequestRecord {
                source: Source::Otlp,
                target: "t".into(),
                model: "m".into(),
                status: Status::Ok,
                finished_unix: finished,
                e2e_s: 1.0,
                ttft_s: Some(ttft),
                tpot_s: None,
                prompt_tokens: None,
                output_tokens: None,
                itl: Vec::new(),
                engine: None,
                request_id: None,
            };
            Compact::of(&r).unwrap()
        };
        for (spread, kept) in [(1.0, true), (300.0, false)] {
            let mut ring = Ring::new(Window::from_secs(60));
            let t0 = 1_700_000_000_000_i64;
            for j in 0..130 {
                for v in 0..40 {
                    let exp = -9.0 + spread * ((j * 40 + v) % 4000) as f64 / 4000.0;
                    ring.add(&record((t0 + j * 500 + 250) as f64 / 1000.0, 10f64.powf(exp)), &[], &[], t0 + j * 500);
                }
            }
            let now = t0 + 130 * 500;
            let got = ring.window(now, 0, all);
            assert_eq!(ring.summed.is_some(), kept, "spread 10^{spread}");
            let mut merged = Sketch::default();
            let e = now.div_euclid(ring.width_ms);
            ring.slots.range(e - ring.n..e).for_each(|(_, s)| merged.merge(&s.sketches[0]));
            assert_eq!(got.sketches[0], merged, "spread 10^{spread}");
            assert_eq!(got.tally.finished, 120 * 40);
        }
    }

    #[test]
    fn a_record_on_an_edge_belongs_to_the_slot_it_ends() {
        let r = Ring::new(Window::from_secs(60));
        assert_eq!(r.width_ms(), 500);
        assert_eq!(r.key(100.5), 200, "(100.0, 100.5]");
        assert_eq!(r.key(100.5000001), 201);
        assert_eq!(r.key(100.0000001), 200);
        assert_eq!(r.key(-0.2), -1);
    }
}
