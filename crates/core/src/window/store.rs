//! The ring of one target's stored scrapes ([`TargetWindows`]): the full part, and the thin
//! part older than the longest configured window (see `thin` for the thin encoding).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::column::Column;
use super::layout::Layout;
use super::thin::{self, Block, Kept, ThinRule};
use crate::canonical::{Engine, Snapshot};

/// Hard cap on stored scrapes per target (e.g. 1 h at 100 ms). Beyond it the oldest go
/// first, so a very long window at a very short interval loses its oldest part rather
/// than growing without bound.
pub const MAX_POINTS: usize = 36_000;

/// At most this many dropped points wait for an incremental evaluation to read them
/// ([`TargetWindows::keep_dropped`]); beyond it (an evaluation stalled for this many
/// scrapes) the oldest go, and that evaluation starts over from the store.
pub const MAX_DROPPED: usize = 4096;

/// A raw keyframe at least every this many scrapes, so a range starting anywhere decodes
/// at most this many extra scrapes.
pub const KEYFRAME_EVERY: usize = 64;

/// One stored scrape: its time, its series layout and one value per series.
#[derive(Debug, Clone)]
pub(super) struct Point {
    pub(super) t_ms: i64,
    pub(super) layout: Arc<Layout>,
    pub(super) column: Column,
}

/// The scrapes of one target, oldest first, covering at least the longest window: the
/// thin part (older than the longest configured window, [`TargetWindows::thin_before`]),
/// then the full part.
///
/// Invariant: the oldest full point is always a raw keyframe, a delta point follows a
/// point with the same layout, and every thin block decodes on its own.
///
/// A clone shares every point's layout and values: it costs a few words per stored
/// scrape.
#[derive(Debug, Default, Clone)]
pub struct TargetWindows {
    pub(super) max_window_ms: i64,
    /// The full part, oldest first.
    pub(super) points: VecDeque<Point>,
    /// The thin part, oldest first, older than `points`: `thin_len` scrapes in blocks.
    pub(super) thin: VecDeque<thin::Block>,
    pub(super) thin_len: usize,
    pub(super) thin_rule: Option<thin::ThinRule>,
    pub(super) engine: Option<Engine>,
    /// The newest scrape's values, decoded: the base of the next delta.
    pub(super) last_values: Vec<f64>,
    pub(super) since_keyframe: usize,
    /// Sequence number of the oldest point: every point keeps the number it was pushed
    /// with, so an incremental evaluation (`evaluate::incremental`) can tell which points
    /// it has already read and which the ring has dropped.
    pub(super) front_seq: u64,
    /// Tells stores apart (a store rebuilt from a snapshot restarts its numbering).
    pub(super) epoch: u64,
    /// Points dropped since the incremental evaluation last read the store, oldest first,
    /// numbered up to `front_seq − 1`: a window may still hold them (it drops them at its
    /// next tick, and needs their values to do so). Kept only once `keep_dropped` was called.
    pub(super) dropped: VecDeque<Point>,
    pub(super) keep_dropped: bool,
}

/// Where a numbered point is stored.
enum Located<'a> {
    Thin(&'a thin::Block, usize),
    Point(&'a Point),
}

/// The next store's epoch; 0 is left to `TargetWindows::default()`.
static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);

impl TargetWindows {
    /// A store that keeps what the longest window (`max_window`) needs.
    pub fn new(max_window: Duration) -> Self {
        let max_window_ms = i64::try_from(max_window.as_millis()).unwrap_or(i64::MAX);
        let epoch = NEXT_EPOCH.fetch_add(1, Ordering::Relaxed);
        TargetWindows { max_window_ms, epoch, ..TargetWindows::default() }
    }

    /// Keeps what a longest window of `max_window` needs from now on (a config reload that
    /// adds, lengthens or removes a window). Nothing held is dropped here: a longer window
    /// keeps every scrape until it ages past the new length, a shorter one lets the next
    /// push drop what no window reads any more.
    pub fn set_max_window(&mut self, max_window: Duration) {
        self.max_window_ms = i64::try_from(max_window.as_millis()).unwrap_or(i64::MAX);
    }

    /// The longest window the store keeps scrapes for.
    pub fn max_window(&self) -> Duration {
        Duration::from_millis(self.max_window_ms.max(0) as u64)
    }

    /// Adds one scrape taken at `t_ms` (Unix milliseconds). Scrapes not newer than the
    /// last one are ignored.
    pub fn push(&mut self, t_ms: i64, snapshot: Arc<Snapshot>) {
        if self.points.back().is_some_and(|p| p.t_ms >= t_ms) {
            return;
        }
        self.engine = Some(snapshot.engine);
        let (layout, values) = Layout::extract(&snapshot, self.points.back().map(|p| &p.layout));
        self.push_values(t_ms, layout, values);
    }

    /// Adds one scrape already split into its layout and values (what [`TargetWindows::push`]
    /// does after [`Layout::extract`]); a store restored from [`TargetWindows::stored_points`]
    /// goes through here. Scrapes not newer than the last one are ignored.
    pub fn push_values(&mut self, t_ms: i64, layout: Arc<Layout>, values: Box<[f64]>) {
        if self.points.back().is_some_and(|p| p.t_ms >= t_ms) || values.len() != layout.keys.len() {
            return;
        }
        // Consecutive equal layouts share one `Arc`, as `extract` arranges for live scrapes.
        let layout = match self.points.back() {
            Some(p) if !Arc::ptr_eq(&p.layout, &layout) && *p.layout == *layout => p.layout.clone(),
            _ => layout,
        };
        let same_layout = self.points.back().is_some_and(|p| Arc::ptr_eq(&p.layout, &layout));
        let base = (same_layout && self.since_keyframe + 1 < KEYFRAME_EVERY).then_some(self.last_values.as_slice());
        let column = Column::encode(&values, base);
        self.since_keyframe = if column.is_raw() { 0 } else { self.since_keyframe + 1 };
        self.last_values = values.into_vec();
        self.points.push_back(Point { t_ms, layout, column });
        // Ranges are left-open (t−w, t] and evaluation never runs before the newest
        // scrape, so a point at or before t_new − w can never be inside a range again.
        let horizon = t_ms.saturating_sub(self.max_window_ms);
        while self.oldest_t().is_some_and(|t| t <= horizon) || self.len() > MAX_POINTS {
            self.pop_oldest();
        }
    }

    /// Appends a block of thin scrapes as a snapshot saved it (`saved`), before any full
    /// scrape: a restore keeps thin scrapes in their blocks rather than replaying them as
    /// full points the next evaluation thins again. Only where [`TargetWindows::takes_block`]
    /// says so; anything else is ignored.
    pub(super) fn push_block(&mut self, block: Block) {
        if !self.takes_block(block.t(0)) {
            return;
        }
        let last = block.last_t();
        self.thin_len += block.len();
        self.thin.push_back(block);
        let horizon = last.saturating_sub(self.max_window_ms);
        while self.oldest_t().is_some_and(|t| t <= horizon) || self.len() > MAX_POINTS {
            self.pop_oldest();
        }
    }

    /// Whether a block of thin scrapes starting at `t_ms` can be appended: the store holds
    /// no full scrape yet, and every thin one it holds is older.
    pub(super) fn takes_block(&self, t_ms: i64) -> bool {
        self.points.is_empty() && self.thin.back().is_none_or(|b| b.last_t() < t_ms)
    }

    /// Every stored scrape, oldest first, decoded: its time, layout (shared by consecutive
    /// scrapes with the same series) and values. Replaying them into a fresh store with the
    /// same config through [`TargetWindows::push_values`] gives the same evaluations.
    pub fn stored_points(&self) -> impl Iterator<Item = (i64, Arc<Layout>, Vec<f64>)> + '_ {
        let mut out = Vec::with_capacity(self.len());
        self.for_each_stored(|t, layout, values| out.push((t, layout.clone(), values.to_vec())));
        out.into_iter()
    }

    /// Calls `f` with each stored scrape, oldest first, as [`TargetWindows::stored_points`]
    /// gives them, without copying its values. Stops at a full scrape that does not decode
    /// (never one built by `push`).
    pub fn for_each_stored(&self, mut f: impl FnMut(i64, &Arc<Layout>, &[f64])) {
        for b in &self.thin {
            b.for_each(0, |_, t, v| {
                f(t, &b.layout, v);
                true
            });
        }
        let mut cur = Vec::new();
        for p in &self.points {
            if !p.column.decode_into(&mut cur) {
                return;
            }
            f(p.t_ms, &p.layout, &cur);
        }
    }

    /// The oldest stored scrape's time.
    fn oldest_t(&self) -> Option<i64> {
        match self.thin.front() {
            Some(b) => Some(b.t(0)),
            None => self.points.front().map(|p| p.t_ms),
        }
    }

    /// Sets the engine of the newest scrape: a restored store has values but no snapshot.
    pub fn set_engine(&mut self, engine: Option<Engine>) {
        self.engine = engine;
    }

    /// Drops the oldest point; the next one becomes a keyframe if it was a delta.
    fn pop_oldest(&mut self) {
        if self.thin_len > 0 {
            self.pop_thin();
            return;
        }
        let Some(old) = self.points.pop_front() else { return };
        self.front_seq += 1;
        if let Some(next) = self.points.front_mut()
            && !next.column.is_raw()
        {
            let mut cur = Vec::new();
            if old.column.decode_into(&mut cur) && next.column.decode_into(&mut cur) {
                next.column = Column::Raw(cur.into());
            } else {
                // Cannot happen with columns built by `Column::encode`; dropping the
                // undecodable point keeps the invariant rather than reading garbage.
                self.dropped.clear();
                self.pop_keep_invariant();
                return;
            }
        }
        if self.keep_dropped {
            self.dropped.push_back(old);
            if self.dropped.len() > MAX_DROPPED {
                self.dropped.pop_front();
            }
        }
    }

    /// Keeps dropped points until [`TargetWindows::release_dropped`]: an incremental
    /// evaluation (`evaluate::incremental`) reads them to take them out of its windows.
    pub fn keep_dropped(&mut self) {
        self.keep_dropped = true;
    }

    /// Forgets the dropped points kept so far.
    pub fn release_dropped(&mut self) {
        self.dropped.clear();
    }

    fn pop_keep_invariant(&mut self) {
        while self.points.front().is_some_and(|p| !p.column.is_raw()) {
            self.points.pop_front();
            self.front_seq += 1;
        }
    }

    /// Engine of the newest scrape.
    pub fn engine(&self) -> Option<Engine> {
        self.engine
    }

    pub fn len(&self) -> usize {
        self.thin_len + self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Calls `f(t_ms, layout, values)` for each stored scrape inside the left-open range
    /// (now − range, now], oldest first. `values[i]` belongs to `layout.keys[i]`.
    pub fn for_each_in_range<'a>(
        &'a self,
        now_ms: i64,
        range_ms: i64,
        mut f: impl FnMut(i64, &'a Arc<Layout>, &[f64]),
    ) {
        let start = now_ms.saturating_sub(range_ms);
        for b in self.thin.iter().filter(|b| b.last_t() > start) {
            let mut newer = false;
            b.for_each(0, |_, t, v| {
                newer = t > now_ms;
                if t > start && !newer {
                    f(t, &b.layout, v);
                }
                !newer
            });
            if newer {
                return;
            }
        }
        let first = self.points.partition_point(|p| p.t_ms <= start);
        // Decode from the keyframe at or before the first point in range.
        if first >= self.points.len() {
            return;
        }
        let mut k = first;
        while k > 0 && !self.points[k].column.is_raw() {
            k -= 1;
        }
        let mut cur = Vec::new();
        for (i, p) in self.points.iter().enumerate().skip(k) {
            if p.t_ms > now_ms || !p.column.decode_into(&mut cur) {
                break;
            }
            if i >= first {
                f(p.t_ms, &p.layout, &cur);
            }
        }
    }

    /// Sequence numbers of the stored points: the oldest is `start`, the newest `end − 1`.
    pub fn seq_range(&self) -> Range<u64> {
        self.front_seq..self.front_seq + self.len() as u64
    }

    /// Which store this is: two stores with the same epoch number their points alike.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Where point `seq` is: a thin block and its index there, or a full or dropped point.
    fn locate(&self, seq: u64) -> Option<Located<'_>> {
        match seq.checked_sub(self.front_seq) {
            Some(i) => {
                let i = usize::try_from(i).ok()?;
                match i.checked_sub(self.thin_len) {
                    None => self.thin_at(i).map(|(b, k)| Located::Thin(b, k)),
                    Some(j) => self.points.get(j).map(Located::Point),
                }
            }
            None => {
                let back = usize::try_from(self.front_seq - seq).ok()?;
                self.dropped.len().checked_sub(back).and_then(|i| self.dropped.get(i)).map(Located::Point)
            }
        }
    }

    /// The point numbered `seq`, stored or dropped but kept: its time and layout (its
    /// values: [`TargetWindows::decode_next`]).
    pub fn point_at(&self, seq: u64) -> Option<(i64, &Arc<Layout>)> {
        Some(match self.locate(seq)? {
            Located::Thin(b, k) => (b.t(k), &b.layout),
            Located::Point(p) => (p.t_ms, &p.layout),
        })
    }

    /// Decodes point `seq` into `values`, which hold the point before it as decoded with
    /// layout `prev` (`None`: unknown). A full point's delta is from the stored form of the
    /// point before it; if that one was thinned since it was decoded (its layout is no
    /// longer `prev`), this decodes from the keyframe instead.
    pub fn decode_next(&self, seq: u64, prev: Option<&Arc<Layout>>, values: &mut Vec<f64>) -> bool {
        match self.locate(seq) {
            Some(Located::Thin(b, k)) => b.decode(k, values),
            Some(Located::Point(p)) if p.column.is_raw() || prev.is_some_and(|l| Arc::ptr_eq(l, &p.layout)) => {
                p.column.decode_into(values)
            }
            Some(Located::Point(_)) => self.decode_at(seq, values),
            None => false,
        }
    }

    /// The first sequence number whose point is newer than `t_ms`.
    pub fn seq_after(&self, t_ms: i64) -> u64 {
        let thin = self.thin_until(t_ms);
        let full = if thin < self.thin_len { 0 } else { self.points.partition_point(|p| p.t_ms <= t_ms) };
        self.front_seq + (thin + full) as u64
    }

    /// Decodes the stored point numbered `seq` into `out`, from the keyframe at or before
    /// it. `false` when it is not stored.
    pub fn decode_at(&self, seq: u64, out: &mut Vec<f64>) -> bool {
        let Some(i) = seq.checked_sub(self.front_seq).and_then(|i| usize::try_from(i).ok()) else { return false };
        let Some(i) = i.checked_sub(self.thin_len) else {
            return self.thin_at(i).is_some_and(|(b, k)| b.decode(k, out));
        };
        if i >= self.points.len() {
            return false;
        }
        let mut k = i;
        while k > 0 && !self.points[k].column.is_raw() {
            k -= 1;
        }
        self.points.range(k..=i).all(|p| p.column.decode_into(out))
    }

    /// Scrape times inside (now − range, now], oldest first.
    pub fn times_in_range(&self, now_ms: i64, range_ms: i64) -> Vec<i64> {
        let mut out = Vec::new();
        self.for_each_in_range(now_ms, range_ms, |t, _, _| out.push(t));
        out
    }

    /// Bytes this store owns on the heap (ring slots, value columns, layouts counted once
    /// however many points share them). What the memory bound in docs/memory.md measures.
    pub fn heap_bytes(&self) -> usize {
        let mut total = (self.points.capacity() + self.dropped.capacity()) * std::mem::size_of::<Point>()
            + self.thin.capacity() * std::mem::size_of::<thin::Block>();
        // Layouts counted once per run of points sharing one.
        let layout = |l: &Arc<Layout>, last: &mut Option<*const Layout>| {
            if *last != Some(Arc::as_ptr(l)) {
                *last = Some(Arc::as_ptr(l));
                std::mem::size_of::<Layout>() + l.heap_bytes()
            } else {
                0
            }
        };
        let mut seen: Option<*const Layout> = None;
        for b in &self.thin {
            total += b.heap_bytes() + layout(&b.layout, &mut seen);
        }
        for p in self.dropped.iter().chain(&self.points) {
            total += p.column.heap_bytes() + layout(&p.layout, &mut seen);
        }
        total + self.last_values.capacity() * std::mem::size_of::<f64>()
    }
}

impl TargetWindows {
    /// Re-encodes every full point at or before `horizon_ms` (but never the newest) into its
    /// thin form under `kept`. The evaluation calls this with `now − longest configured
    /// window` once its windows have taken out what left them: from then on no configured
    /// window can hold those points, and the alert-only windows read only kept series.
    ///
    /// A changed `kept` applies to the points thinned from then on; thin points stay as
    /// they are (their series cannot come back).
    pub fn thin_before(&mut self, horizon_ms: i64, kept: &Kept) {
        if self.thin_rule.as_ref().is_none_or(|t| t.kept != *kept) {
            self.thin_rule = Some(ThinRule::new(kept.clone()));
        }
        while self.points.len() > 1 && self.points[0].t_ms <= horizon_ms {
            if !self.thin_one() {
                break;
            }
        }
        // A store filled whole first (restored from a snapshot) keeps the ring it grew to.
        let len = self.points.len();
        if self.points.capacity() > 2 * len + 64 {
            self.points.shrink_to(len + len / 4 + 16);
        }
    }

    /// Scrapes in the thin part (the oldest ones).
    pub fn thin_points(&self) -> usize {
        self.thin_len
    }

    /// Thins the oldest full point (a keyframe); the full point after it becomes one.
    fn thin_one(&mut self) -> bool {
        let (Some(rule), Some(point)) = (self.thin_rule.as_mut(), self.points.front()) else { return false };
        let mut full = Vec::new();
        if !point.column.decode_into(&mut full) || full.len() != point.layout.keys.len() {
            return false;
        }
        // Decode the next point before anything changes: it is a delta from these values.
        let next = match self.points.get(1).map(|p| &p.column) {
            Some(c) if !c.is_raw() => {
                let mut cur = full.clone();
                if !c.decode_into(&mut cur) {
                    // Cannot happen with columns built by `Column::encode`; leave it full.
                    return false;
                }
                Some(cur)
            }
            _ => None,
        };
        let (cols, layout) = rule.project(&point.layout, self.thin.back().map(|b| &b.layout));
        let values: Vec<f64> = cols.iter().map(|&c| full[c as usize]).collect();
        let t_ms = point.t_ms;
        match self.thin.back_mut() {
            Some(b) if Arc::ptr_eq(&b.layout, &layout) && b.fits(t_ms) => b.push(t_ms, &values),
            last => {
                if let Some(b) = last {
                    b.close();
                }
                self.thin.push_back(Block::new(layout, t_ms, &values));
            }
        }
        self.points.pop_front();
        self.thin_len += 1;
        if let (Some(cur), Some(p)) = (next, self.points.front_mut()) {
            p.column = Column::Raw(cur.into());
        }
        true
    }

    /// Drops the oldest thin point, kept aside for the incremental evaluation if asked.
    pub(super) fn pop_thin(&mut self) {
        let Some(block) = self.thin.front_mut() else {
            self.thin_len = 0;
            return;
        };
        if self.keep_dropped {
            let mut values = Vec::new();
            if block.decode(0, &mut values) {
                let column = Column::Raw(values.into());
                self.dropped.push_back(Point { t_ms: block.t(0), layout: block.layout.clone(), column });
                if self.dropped.len() > MAX_DROPPED {
                    self.dropped.pop_front();
                }
            }
        }
        block.skip += 1;
        if block.len() == 0 {
            self.thin.pop_front();
        }
        self.thin_len -= 1;
        self.front_seq += 1;
    }

    /// The block holding thin point `i` (0: the oldest stored), and its index in it.
    pub(super) fn thin_at(&self, mut i: usize) -> Option<(&Block, usize)> {
        for b in &self.thin {
            if i < b.len() {
                return Some((b, i));
            }
            i -= b.len();
        }
        None
    }

    /// Thin points at or before `t_ms`.
    pub(super) fn thin_until(&self, t_ms: i64) -> usize {
        let mut n = 0;
        for b in &self.thin {
            if b.last_t() <= t_ms {
                n += b.len();
                continue;
            }
            return n + (0..b.len()).take_while(|&k| b.t(k) <= t_ms).count();
        }
        n
    }
}
