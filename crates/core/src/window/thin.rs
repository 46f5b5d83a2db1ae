//! The thin part of a window store: scrapes older than the longest configured window,
//! re-encoded with only the series some alert-only window reads
//! (docs/memory.md#thin-scrapes-beyond-the-configured-windows).
//!
//! The 6 h burn-rate window of the default alert rules reads a few dozen series per rank;
//! every configured window is an hour at most. So the evaluation that owns a store tells it,
//! at each tick, where the configured windows end ([`TargetWindows::thin_before`]), and the
//! store projects every older scrape onto the series that [`Kept`] names. The projection is
//! a pure function of the scrape and the kept set (the same full scrape always gives the
//! same thin scrape) and keeps what resets and coverage read: each kept series' `_created`,
//! the process start, and per model at least one column, so a model that only carried
//! series nobody keeps still counts in a window's span.
//!
//! A thin scrape is a few bytes, so a slot and an allocation per scrape would cost more
//! than its values. Thin scrapes are kept in [`Block`]s instead: up to [`BLOCK`]
//! consecutive scrapes of one thin layout, the first packed against zeros (a keyframe,
//! `column::Frame`), the others as one [`Column`] of differences from it. Every block
//! decodes on its own, and so does every segment of the full part (`full`): no decode
//! crosses from one part to the other.
//!
//! A block's scrape times are kept as the change of each step, not as the times: scrapes
//! come at a steady interval with a few ms of jitter, so the step from one scrape to the
//! next is nearly the one before, and its change is a byte where an offset would be four.
//! The block keeps its count, last time and last step besides, so that appending a scrape
//! and reading the newest time stay O(1); an older time is decoded from the block's start,
//! as its values are.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::column::{Column, Frame, get_varint, put_varint, unzigzag, whole, zigzag};
use super::layout::{Layout, Quantity, SeriesKey};
use crate::canonical::{CounterKind, GaugeKind, HistogramKind};
use crate::slo::stops_at;

/// Thin scrapes per block: decoding one costs decoding its block (`BLOCK` × kept series),
/// and each block keeps its first scrape whole (packed against zeros), so a longer block
/// costs less memory and more decoding (docs/memory.md#thin-scrapes-beyond-the-configured-windows).
pub const BLOCK: usize = 64;

/// One histogram of one (model, shard): its buckets' bounds are what a bracket walks.
type Group<'a> = (&'a str, &'a str, HistogramKind);

/// Which buckets of a histogram a thin scrape keeps.
#[derive(Debug, Clone, PartialEq)]
pub enum Buckets {
    /// Every bucket: a latency rule reads the window's quantiles.
    Every,
    /// What the SLO brackets at these thresholds (sorted, in seconds) read
    /// (`slo::stops_at`): in each (model, shard), every bound under the first bound the
    /// bracket stops at, that bound, and `+Inf`. Buckets above it are never read, so a
    /// window keeping only these reports what one keeping every bucket does, bit for bit,
    /// whatever the counts (`good_counts` takes a running maximum over the buckets below).
    Brackets(Vec<f64>),
}

impl Buckets {
    /// What both keep together.
    pub fn union(&self, other: &Buckets) -> Buckets {
        match (self, other) {
            (Buckets::Brackets(a), Buckets::Brackets(b)) => {
                let mut all: Vec<f64> = a.iter().chain(b).copied().collect();
                all.sort_by(f64::total_cmp);
                all.dedup();
                Buckets::Brackets(all)
            }
            _ => Buckets::Every,
        }
    }
}

/// The series the thin part of a store keeps: what the alert-only windows read, together.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Kept {
    /// The buckets of these histograms (not their `_sum` and `_count`, which no
    /// alert-only window reads).
    pub histograms: Vec<(HistogramKind, Buckets)>,
    /// These counters, every finish reason.
    pub counters: Vec<CounterKind>,
    pub gauges: Vec<GaugeKind>,
    /// Spec-decode acceptances per draft position.
    pub spec_accepted: bool,
}

impl Kept {
    /// Whether a thin scrape keeps series of `q`; for a bucket, whether it keeps any bucket
    /// of its histogram (which ones depends on the scrape's other bounds: [`Kept::mask`]).
    pub fn keeps(&self, q: Quantity) -> bool {
        match q {
            Quantity::Bucket(k, _) => self.buckets(k).is_some(),
            Quantity::Sum(_) | Quantity::Count(_) => false,
            Quantity::Counter(k, _) => self.counters.contains(&k),
            Quantity::SpecAccepted(_) => self.spec_accepted,
            Quantity::Gauge(k) => self.gauges.contains(&k),
        }
    }

    /// The buckets of `kind` kept, if any.
    pub fn buckets(&self, kind: HistogramKind) -> Option<&Buckets> {
        self.histograms.iter().find(|(k, _)| *k == kind).map(|(_, b)| b)
    }

    /// Whether each column of `layout` is kept: [`Kept::keeps`], and of a histogram kept
    /// for its brackets only the buckets they read in that column's (model, shard).
    pub fn mask(&self, layout: &Layout) -> Vec<bool> {
        self.mask_of(layout.keys.iter().map(Some))
    }

    /// [`Kept::mask`] of a layout's columns given as series keys (`None`: a column kept
    /// for no one).
    pub fn mask_of<'a>(&self, keys: impl Iterator<Item = Option<&'a SeriesKey>>) -> Vec<bool> {
        let keys: Vec<Option<&SeriesKey>> = keys.collect();
        let mut mask: Vec<bool> = keys.iter().map(|k| k.is_some_and(|k| self.keeps(k.quantity))).collect();
        // Per (model, shard, histogram) and threshold, the lowest bound the bracket stops
        // at and its column.
        let mut stops: HashMap<Group, Vec<Option<(f64, usize)>>> = HashMap::new();
        for (c, key) in keys.iter().enumerate() {
            let Some(key) = key else { continue };
            let (Quantity::Bucket(kind, _), Some(le)) = (key.quantity, key.quantity.le()) else { continue };
            let Some(Buckets::Brackets(thresholds)) = self.buckets(kind) else { continue };
            if le == f64::INFINITY {
                continue;
            }
            mask[c] = thresholds.iter().any(|&t| !stops_at(le, t));
            let lowest = stops.entry((&key.model, &key.shard, kind)).or_insert_with(|| vec![None; thresholds.len()]);
            for (l, &t) in lowest.iter_mut().zip(thresholds) {
                if stops_at(le, t) && l.is_none_or(|(b, _)| le < b) {
                    *l = Some((le, c));
                }
            }
        }
        for (_, c) in stops.values().flatten().flatten() {
            mask[*c] = true;
        }
        mask
    }

    /// The columns of `layout` a thin scrape keeps, in order: every kept series, and the
    /// first column of each model that has none.
    fn columns(&self, layout: &Layout) -> Vec<u32> {
        let mask = self.mask(layout);
        let mut cols: Vec<u32> = (0..layout.keys.len() as u32).filter(|&c| mask[c as usize]).collect();
        let mut carried: HashSet<&str> = cols.iter().map(|&c| &*layout.keys[c as usize].model).collect();
        let lone: Vec<u32> =
            (0..layout.keys.len() as u32).filter(|&c| carried.insert(&*layout.keys[c as usize].model)).collect();
        if !lone.is_empty() {
            cols.extend(lone);
            cols.sort_unstable();
        }
        cols
    }
}

/// The rule the thin part follows and the projection of the last full layout thinned.
#[derive(Debug, Clone)]
pub(super) struct ThinRule {
    pub(super) kept: Kept,
    /// The last full layout projected: consecutive scrapes share one.
    projection: Option<Projection>,
}

/// A full layout, the columns it keeps and its thin layout.
type Projection = (Arc<Layout>, Arc<[u32]>, Arc<Layout>);

impl ThinRule {
    /// A rule keeping `kept`, nothing projected yet.
    pub(super) fn new(kept: Kept) -> ThinRule {
        ThinRule { kept, projection: None }
    }

    /// The thin layout of `layout` and the columns it keeps. A projection equal to `last`
    /// (the newest thin scrape's layout) shares it, so thin scrapes of different full
    /// layouts (a series nobody keeps appeared) still share a block.
    pub(super) fn project(&mut self, layout: &Arc<Layout>, last: Option<&Arc<Layout>>) -> (Arc<[u32]>, Arc<Layout>) {
        if let Some((full, cols, thin)) = &self.projection
            && Arc::ptr_eq(full, layout)
        {
            return (cols.clone(), thin.clone());
        }
        let cols: Arc<[u32]> = self.kept.columns(layout).into();
        let fresh = Layout {
            keys: cols.iter().map(|&c| layout.keys[c as usize].clone()).collect(),
            created: cols.iter().map(|&c| layout.created[c as usize]).collect(),
            process_start: layout.process_start,
        };
        let thin = match last {
            Some(l) if **l == fresh => l.clone(),
            // Nothing to drop (it was thin already, e.g. restored from a snapshot).
            _ if cols.len() == layout.keys.len() => layout.clone(),
            _ => Arc::new(fresh),
        };
        self.projection = Some((layout.clone(), cols.clone(), thin.clone()));
        (cols, thin)
    }
}

/// A [`Block`]'s fields as a snapshot saves them (`saved`), its columns as packed bytes. A
/// plain struct of this module's own: `saved` imports this module, not the other way round
/// (modules import in one direction, tests/layering.rs), and converts it to its serde type.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct BlockParts {
    pub t0: i64,
    pub skip: usize,
    pub base: Vec<f64>,
    /// Every scrape's time in ms after `t0`, the first (0) included: what the block encodes
    /// ([`Block::from_parts`] checks and re-encodes it), not its bytes, so that the encoding
    /// can change without the snapshot format.
    pub times: Vec<u32>,
    pub sealed: Option<(Vec<u8>, Vec<u8>)>,
    pub open: Vec<Vec<u8>>,
}

/// Consecutive thin scrapes of one layout.
#[derive(Debug, Clone)]
pub(super) struct Block {
    pub(super) layout: Arc<Layout>,
    /// The first scrape's values (kept after it is dropped), packed: every other scrape's
    /// base.
    base: Frame,
    /// The first scrape's time.
    t0: i64,
    /// Scrapes 1.. of the block's times, each as its step minus the step before (the first
    /// step's before being 0), a zigzag varint ([`Times`]): a steady interval with a few ms
    /// of jitter is a byte a scrape, where a `u32` offset from `t0` would be four and a
    /// thin scrape's values are a few bytes. A block spans at most `u32::MAX` ms
    /// ([`Block::fits`]), so a change takes at most 5 bytes.
    times: Vec<u8>,
    /// Scrapes in the block, those dropped from the front included (at most [`BLOCK`]):
    /// with `last` and `step`, what `push`, `len` and `last_t` read without a decode.
    count: u8,
    /// The newest scrape's time after `t0`.
    last: u32,
    /// The newest step (0 for a block of one scrape): what the next scrape's change is from.
    step: u32,
    /// Scrapes dropped from the front.
    pub(super) skip: usize,
    /// Scrapes 1.. as differences: one column for all of them once the block is full
    /// (from the trend through `base`, see [`Block::predicted`]), one per scrape from
    /// `base` while it fills.
    pub(super) sealed: Option<(Column, Column)>,
    open: Vec<Column>,
}

impl Block {
    pub(super) fn new(layout: Arc<Layout>, t_ms: i64, values: &[f64]) -> Block {
        Block {
            layout,
            base: Frame::new(values),
            t0: t_ms,
            // A byte a scrape at a steady interval: the block's whole, allocated once.
            times: Vec::with_capacity(BLOCK - 1),
            count: 1,
            last: 0,
            step: 0,
            skip: 0,
            sealed: None,
            open: Vec::new(),
        }
    }

    /// Whether a scrape at `t_ms` (newer than the block's) can join it.
    pub(super) fn fits(&self, t_ms: i64) -> bool {
        self.n() < BLOCK && t_ms.checked_sub(self.t0).and_then(|d| u32::try_from(d).ok()).is_some_and(|d| d > self.last)
    }

    /// Scrapes in the block, those dropped from the front included.
    fn n(&self) -> usize {
        usize::from(self.count)
    }

    /// Every scrape's time after `t0`, oldest first, the first (0) included.
    fn offsets(&self) -> Times<'_> {
        Times { bytes: &self.times, pos: 0, next: Some(0), step: 0 }
    }

    /// Appends a scrape `off` ms after `t0`, later than the newest.
    fn push_time(&mut self, off: u32) {
        let step = off.saturating_sub(self.last);
        put_varint(&mut self.times, zigzag(i64::from(step) - i64::from(self.step)));
        self.count = self.count.saturating_add(1);
        self.last = off;
        self.step = step;
    }

    /// The time of scrape `j` (`j` < the block's count), counting those dropped from the
    /// front: O(`j`), decoded from the block's start.
    fn time(&self, j: usize) -> i64 {
        let off = if j + 1 == self.n() { Some(self.last) } else { self.offsets().nth(j) };
        // Past the newest: not a time of the block, but none after it either.
        self.t0 + i64::from(off.unwrap_or(self.last))
    }

    /// Gives back what a block that will take no more scrapes over-allocated.
    pub(super) fn close(&mut self) {
        self.times.shrink_to_fit();
        self.open.shrink_to_fit();
    }

    /// Scrapes still stored.
    pub(super) fn len(&self) -> usize {
        self.n() - self.skip
    }

    /// The time of stored scrape `k` (0: the oldest); O(`k` + dropped scrapes).
    pub(super) fn t(&self, k: usize) -> i64 {
        self.time(self.skip + k)
    }

    pub(super) fn last_t(&self) -> i64 {
        self.t0 + i64::from(self.last)
    }

    /// Stored scrapes at or before `t_ms`, in one pass over the times.
    pub(super) fn count_until(&self, t_ms: i64) -> usize {
        let Some(d) = t_ms.checked_sub(self.t0) else { return 0 };
        self.offsets().take_while(|&o| i64::from(o) <= d).count().saturating_sub(self.skip)
    }

    pub(super) fn push(&mut self, t_ms: i64, values: &[f64]) {
        // Built by `Frame::new`, the base decodes.
        let base = self.base.values().unwrap_or_default();
        self.open.push(Column::encode(values, Some(&base)));
        // `fits` said the offset does, and that it is after the newest.
        self.push_time(u32::try_from(t_ms - self.t0).unwrap_or(u32::MAX).max(self.last.saturating_add(1)));
        if self.n() < BLOCK {
            return;
        }
        let mut all = Vec::with_capacity((self.n() - 1) * base.len());
        let mut cur = Vec::new();
        for c in &self.open {
            cur.clear();
            cur.extend_from_slice(&base);
            if !c.decode_into(&mut cur) {
                return; // cannot happen with columns built by `Column::encode`: stay open
            }
            all.extend_from_slice(&cur);
        }
        // Counters climb at a steady pace: differences from the block's average step are
        // a byte where differences from its first scrape would be two.
        let width = base.len();
        let steps = (self.n() - 1) as f64;
        let last = &all[all.len() - width..];
        let slopes: Vec<f64> = (base.iter().zip(last))
            .map(|(&b, &l)| if whole(b) && whole(l) { ((l - b) / steps).round() + 0.0 } else { 0.0 })
            .collect();
        let trend = Column::encode(&slopes, Some(&vec![0.0; width]));
        let predicted = Self::predicted(&base, &slopes, self.n());
        self.sealed = Some((Column::encode(&all, Some(&predicted)), trend));
        self.open = Vec::new();
        self.close();
    }

    /// Scrapes 1..`n` on the line from `base` with integer `slopes` (where it stays exact).
    fn predicted(base: &[f64], slopes: &[f64], n: usize) -> Vec<f64> {
        let mut out = Vec::with_capacity((n - 1) * base.len());
        for m in 1..n {
            out.extend(base.iter().zip(slopes).map(|(&b, &s)| {
                let p = b + m as f64 * s;
                if whole(p) { p } else { b }
            }));
        }
        out
    }

    /// The block as a snapshot keeps it: its own columns' bytes, so that saving a thin scrape
    /// costs a copy, not a decode and a re-encode. `None` for a block holding a raw column
    /// (never one `push` built), which the caller saves scrape by scrape instead.
    pub(super) fn parts(&self) -> Option<BlockParts> {
        let base = self.base.values()?;
        let delta = |c: &Column| match c {
            Column::Delta(b) => Some(b.to_vec()),
            Column::Raw(_) => None,
        };
        let sealed = match &self.sealed {
            Some((s, t)) => Some((delta(s)?, delta(t)?)),
            None => None,
        };
        let times: Vec<u32> = self.offsets().collect();
        if times.len() != self.n() {
            return None; // cannot happen with times `push_time` encoded
        }
        Some(BlockParts {
            t0: self.t0,
            skip: self.skip,
            base,
            times,
            sealed,
            open: self.open.iter().map(delta).collect::<Option<_>>()?,
        })
    }

    /// The block `parts` describe, if they are consistent with each other and with `layout`
    /// (a snapshot's bytes are checked, not trusted): [`Block::for_each`] then decodes it
    /// without indexing out of bounds, or says the columns do not decode.
    pub(super) fn from_parts(layout: Arc<Layout>, parts: BlockParts) -> Option<Block> {
        let BlockParts { t0, skip, base, times, sealed, open } = parts;
        let n = times.len();
        let consistent = base.len() == layout.keys.len()
            && n <= BLOCK
            && times.first() == Some(&0)
            && times.windows(2).all(|w| w[0] < w[1])
            && skip < n
            && t0.checked_add(i64::from(times[n - 1])).is_some()
            && match &sealed {
                Some(_) => open.is_empty() && n > 1,
                None => open.len() == n - 1,
            };
        if !consistent {
            return None;
        }
        let mut block = Block {
            layout,
            base: Frame::new(&base),
            t0,
            times: Vec::with_capacity(n - 1),
            count: 1,
            last: 0,
            step: 0,
            skip,
            sealed: sealed.map(|(s, t)| (Column::Delta(s.into()), Column::Delta(t.into()))),
            open: open.into_iter().map(|c| Column::Delta(c.into())).collect(),
        };
        // Strictly increasing from 0, checked above: every step is positive.
        for &off in &times[1..] {
            block.push_time(off);
        }
        block.times.shrink_to_fit();
        Some(block)
    }

    /// Calls `f(k, t_ms, values)` for the stored scrapes from `k = from` on, oldest first;
    /// stops at the first `false` from `f`. `false` if a column does not decode.
    pub(super) fn for_each(&self, from: usize, mut f: impl FnMut(usize, i64, &[f64]) -> bool) -> bool {
        let Some(base) = self.base.values() else { return false };
        let width = base.len();
        let first = self.skip + from;
        if first == 0 && !f(0, self.t0, &base) {
            return true;
        }
        let first = first.max(1);
        // Decoded alongside the values, from the block's start.
        let mut times = self.offsets().skip(first).map(|o| self.t0 + i64::from(o));
        let mut cur = Vec::new();
        if let Some((sealed, trend)) = &self.sealed {
            let mut slopes = vec![0.0; width];
            if !trend.decode_into(&mut slopes) || slopes.len() != width {
                return false;
            }
            cur = Self::predicted(&base, &slopes, self.n());
            if !sealed.decode_into(&mut cur) || cur.len() != (self.n() - 1) * width {
                return false;
            }
            for j in first..self.n() {
                let Some(t) = times.next() else { return false };
                if !f(j - self.skip, t, &cur[(j - 1) * width..j * width]) {
                    break;
                }
            }
            return true;
        }
        for j in first..self.n() {
            cur.clear();
            cur.extend_from_slice(&base);
            let Some(t) = times.next() else { return false };
            if !self.open[j - 1].decode_into(&mut cur) {
                return false;
            }
            if !f(j - self.skip, t, &cur) {
                break;
            }
        }
        true
    }

    /// Decodes stored scrape `k` into `out`.
    pub(super) fn decode(&self, k: usize, out: &mut Vec<f64>) -> bool {
        let mut found = false;
        let ok = self.for_each(k, |_, _, v| {
            out.clear();
            out.extend_from_slice(v);
            found = true;
            false
        });
        ok && found
    }

    pub(super) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.base.heap_bytes()
            + self.times.capacity()
            + self.sealed.as_ref().map_or(0, |(s, t)| s.heap_bytes() + t.heap_bytes())
            + self.open.iter().map(Column::heap_bytes).sum::<usize>()
            + self.open.capacity() * size_of::<Column>()
    }
}

/// A block's times after its `t0`, decoded one step at a time from [`Block::times`].
struct Times<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// The next offset to yield; `None` once the bytes are spent (or do not decode).
    next: Option<u32>,
    step: i64,
}

impl Iterator for Times<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        let off = self.next?;
        self.next = if self.pos == self.bytes.len() {
            None
        } else {
            // Bytes only `Block::push_time` wrote: an offset that leaves `u32` cannot occur,
            // and ends the times rather than wrapping.
            get_varint(self.bytes, &mut self.pos).and_then(|z| {
                self.step = self.step.checked_add(unzigzag(z))?;
                u32::try_from(i64::from(off).checked_add(self.step)?).ok()
            })
        };
        Some(off)
    }
}
