//! One target's stored scrapes ([`TargetWindows`]): the full part (`full`), and the thin
//! part older than the longest configured window (`thin`).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::column::Column;
use super::full::Segment;
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

/// A dropped scrape kept for the incremental evaluation: its time, its series layout and
/// its values.
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
/// Invariant: every full segment and every thin block decodes on its own.
///
/// A clone shares every segment and block's layout and values: it costs a few words per
/// segment and block.
#[derive(Debug, Default, Clone)]
pub struct TargetWindows {
    pub(super) max_window_ms: i64,
    /// The full part, oldest first: `full_len` scrapes in segments.
    pub(super) full: VecDeque<Arc<Segment>>,
    pub(super) full_len: usize,
    /// The oldest full scrape's sequence number and values, decoded: thinning or dropping it
    /// steps these one difference on to the next scrape rather than decoding that one from
    /// its segment's keyframe.
    front: Option<(u64, Vec<f64>)>,
    /// The thin part, oldest first, older than the full part: `thin_len` scrapes in blocks.
    pub(super) thin: VecDeque<thin::Block>,
    pub(super) thin_len: usize,
    pub(super) thin_rule: Option<thin::ThinRule>,
    pub(super) engine: Option<Engine>,
    /// The newest scrape's values, decoded: the base of the next delta.
    pub(super) last_values: Vec<f64>,
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
    Full(&'a Segment, usize),
    Dropped(&'a Point),
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
        if self.newest_t().is_some_and(|t| t >= t_ms) {
            return;
        }
        self.engine = Some(snapshot.engine);
        let (layout, values) = Layout::extract(&snapshot, self.full.back().map(|s| &s.layout));
        self.push_values(t_ms, layout, values);
    }

    /// Adds one scrape already split into its layout and values (what [`TargetWindows::push`]
    /// does after [`Layout::extract`]); a store restored from [`TargetWindows::stored_points`]
    /// goes through here. Scrapes not newer than the last one are ignored.
    pub fn push_values(&mut self, t_ms: i64, layout: Arc<Layout>, values: Box<[f64]>) {
        if self.newest_t().is_some_and(|t| t >= t_ms) || values.len() != layout.keys.len() {
            return;
        }
        // Consecutive equal layouts share one `Arc`, as `extract` arranges for live scrapes.
        let layout = match self.full.back() {
            Some(s) if !Arc::ptr_eq(&s.layout, &layout) && *s.layout == *layout => s.layout.clone(),
            _ => layout,
        };
        match self.full.back_mut() {
            Some(s) if s.fits(t_ms, &layout) => Arc::make_mut(s).push(t_ms, &values, &self.last_values),
            last => {
                let mut reserve = 0;
                if let Some(s) = last {
                    reserve = s.full_bytes().filter(|_| Arc::ptr_eq(&s.layout, &layout)).unwrap_or(0);
                    Arc::make_mut(s).close();
                }
                self.full.push_back(Arc::new(Segment::new(layout, t_ms, &values, reserve)));
            }
        }
        self.full_len += 1;
        self.last_values = values.into_vec();
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
        self.full_len == 0 && self.thin.back().is_none_or(|b| b.last_t() < t_ms)
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
        for s in &self.full {
            let decoded = s.for_each(0, |_, t, v| {
                f(t, &s.layout, v);
                true
            });
            if !decoded {
                return;
            }
        }
    }

    /// The oldest stored scrape's time.
    fn oldest_t(&self) -> Option<i64> {
        match self.thin.front() {
            Some(b) => Some(b.t(0)),
            None => self.full.front().map(|s| s.t(0)),
        }
    }

    /// The newest stored scrape's time.
    fn newest_t(&self) -> Option<i64> {
        match self.full.back() {
            Some(s) => Some(s.last_t()),
            None => self.thin.back().map(|b| b.last_t()),
        }
    }

    /// Sets the engine of the newest scrape: a restored store has values but no snapshot.
    pub fn set_engine(&mut self, engine: Option<Engine>) {
        self.engine = engine;
    }

    /// Drops the oldest point.
    fn pop_oldest(&mut self) {
        if self.thin_len > 0 {
            self.pop_thin();
            return;
        }
        if !self.keep_dropped {
            self.take_front_full();
            self.front_seq += 1;
            return;
        }
        let Some((t_ms, layout)) = self.full.front().map(|s| (s.t(0), s.layout.clone())) else { return };
        let values: Option<Arc<[f64]>> = self.front_values().map(Arc::from);
        self.take_front_full();
        self.front_seq += 1;
        match values {
            Some(v) => {
                self.dropped.push_back(Point { t_ms, layout, column: Column::Raw(v) });
                if self.dropped.len() > MAX_DROPPED {
                    self.dropped.pop_front();
                }
            }
            // Cannot happen with segments built by `push`; a window that held the point
            // starts over rather than reading garbage.
            None => self.dropped.clear(),
        }
    }

    /// The oldest full scrape's values: the cursor `front`, decoded from its segment if it
    /// is not on that scrape. Borrowed, so that thinning or dropping a scrape each tick
    /// copies no more of it than it keeps.
    fn front_values(&mut self) -> Option<&[f64]> {
        let seq = self.front_seq + self.thin_len as u64;
        if self.front.as_ref().is_none_or(|(s, _)| *s != seq) {
            let mut values = Vec::new();
            let decoded = self.full.front().is_some_and(|s| s.decode(0, &mut values));
            self.front = decoded.then_some((seq, values));
        }
        self.front.as_ref().map(|(_, v)| v.as_slice())
    }

    /// Takes the oldest full scrape out of the full part, and steps the cursor `front` on
    /// to the next if it was on this one. The caller counts it as dropped or thinned: either
    /// way the next full scrape's number is one more.
    fn take_front_full(&mut self) {
        let seq = self.front_seq + self.thin_len as u64;
        let Some(first) = self.full.front_mut() else { return };
        let segment = Arc::make_mut(first);
        segment.drop_oldest();
        if segment.len() == 0 {
            self.full.pop_front();
        }
        self.full_len -= 1;
        // The next scrape is a difference from the one taken out, or the next segment's
        // keyframe.
        self.front = match (self.front.take(), self.full.front()) {
            (Some((s, mut values)), Some(next)) if s == seq => next.step(0, &mut values).then_some((seq + 1, values)),
            _ => None,
        };
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

    /// Engine of the newest scrape.
    pub fn engine(&self) -> Option<Engine> {
        self.engine
    }

    pub fn len(&self) -> usize {
        self.thin_len + self.full_len
    }

    /// Whether the store holds no full scrape (thin ones alone are not evaluated).
    pub fn is_empty(&self) -> bool {
        self.full_len == 0
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
        for s in self.full.iter().filter(|s| s.last_t() > start) {
            let mut newer = false;
            let decoded = s.for_each(s.count_until(start), |_, t, v| {
                newer = t > now_ms;
                if !newer {
                    f(t, &s.layout, v);
                }
                !newer
            });
            if newer || !decoded {
                return;
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
                    Some(j) => self.full_at(j).map(|(s, k)| Located::Full(s, k)),
                }
            }
            None => {
                let back = usize::try_from(self.front_seq - seq).ok()?;
                self.dropped.len().checked_sub(back).and_then(|i| self.dropped.get(i)).map(Located::Dropped)
            }
        }
    }

    /// The point numbered `seq`, stored or dropped but kept: its time and layout (its
    /// values: [`TargetWindows::decode_next`]).
    pub fn point_at(&self, seq: u64) -> Option<(i64, &Arc<Layout>)> {
        Some(match self.locate(seq)? {
            Located::Thin(b, k) => (b.t(k), &b.layout),
            Located::Full(s, k) => (s.t(k), &s.layout),
            Located::Dropped(p) => (p.t_ms, &p.layout),
        })
    }

    /// Decodes point `seq` into `values`, which hold the point before it as decoded with
    /// layout `prev` (`None`: unknown). A full point's delta is from the point before it
    /// (in its segment, or dropped from its front) as it was stored; if that one was thinned
    /// since it was decoded (its layout is no longer `prev`), this decodes from the
    /// segment's keyframe instead.
    pub fn decode_next(&self, seq: u64, prev: Option<&Arc<Layout>>, values: &mut Vec<f64>) -> bool {
        match self.locate(seq) {
            Some(Located::Thin(b, k)) => b.decode(k, values),
            Some(Located::Full(s, k)) if s.is_key(k) || prev.is_some_and(|l| Arc::ptr_eq(l, &s.layout)) => {
                s.step(k, values)
            }
            Some(Located::Full(s, k)) => s.decode(k, values),
            Some(Located::Dropped(p)) => p.column.decode_into(values),
            None => false,
        }
    }

    /// The first sequence number whose point is newer than `t_ms`.
    pub fn seq_after(&self, t_ms: i64) -> u64 {
        let thin = self.thin_until(t_ms);
        let full = if thin < self.thin_len { 0 } else { self.full_until(t_ms) };
        self.front_seq + (thin + full) as u64
    }

    /// Decodes the stored point numbered `seq` into `out`, from the keyframe at or before
    /// it. `false` when it is not stored.
    pub fn decode_at(&self, seq: u64, out: &mut Vec<f64>) -> bool {
        let Some(i) = seq.checked_sub(self.front_seq).and_then(|i| usize::try_from(i).ok()) else { return false };
        let Some(i) = i.checked_sub(self.thin_len) else {
            return self.thin_at(i).is_some_and(|(b, k)| b.decode(k, out));
        };
        self.full_at(i).is_some_and(|(s, k)| s.decode(k, out))
    }

    /// Full points at or before `t_ms` (as [`TargetWindows::thin_until`] counts thin ones).
    fn full_until(&self, t_ms: i64) -> usize {
        let mut n = 0;
        for s in &self.full {
            if s.last_t() <= t_ms {
                n += s.len();
                continue;
            }
            return n + s.count_until(t_ms);
        }
        n
    }

    /// The segment holding full point `i` (0: the oldest full), and its index in it. The
    /// windows read near either end of the full part, so the search starts at the nearer.
    fn full_at(&self, i: usize) -> Option<(&Segment, usize)> {
        if i >= self.full_len {
            return None;
        }
        if 2 * i < self.full_len {
            let mut i = i;
            for s in &self.full {
                if i < s.len() {
                    return Some((s, i));
                }
                i -= s.len();
            }
            return None;
        }
        // Counting from the newest: `back` full points lie after point `i`.
        let mut back = self.full_len - 1 - i;
        for s in self.full.iter().rev() {
            if back < s.len() {
                return Some((s, s.len() - 1 - back));
            }
            back -= s.len();
        }
        None
    }

    /// Scrape times inside (now − range, now], oldest first.
    pub fn times_in_range(&self, now_ms: i64, range_ms: i64) -> Vec<i64> {
        let mut out = Vec::new();
        self.for_each_in_range(now_ms, range_ms, |t, _, _| out.push(t));
        out
    }

    /// Bytes this store owns on the heap (segments, blocks, value columns, layouts counted
    /// once however many points share them). What the memory bound in docs/memory.md
    /// measures.
    pub fn heap_bytes(&self) -> usize {
        let mut total = self.dropped.capacity() * std::mem::size_of::<Point>()
            + self.full.capacity() * std::mem::size_of::<Arc<Segment>>()
            + self.thin.capacity() * std::mem::size_of::<thin::Block>()
            + self.front.as_ref().map_or(0, |(_, v)| v.capacity() * std::mem::size_of::<f64>());
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
        for s in &self.full {
            total += s.heap_bytes() + layout(&s.layout, &mut seen);
        }
        for p in &self.dropped {
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
        while self.full_len > 1 && self.full.front().is_some_and(|s| s.t(0) <= horizon_ms) {
            if !self.thin_one() {
                break;
            }
        }
    }

    /// Scrapes in the thin part (the oldest ones).
    pub fn thin_points(&self) -> usize {
        self.thin_len
    }

    /// Thins the oldest full point.
    fn thin_one(&mut self) -> bool {
        if self.front_values().is_none() {
            return false;
        }
        let (Some(rule), Some(first), Some((_, full))) =
            (self.thin_rule.as_mut(), self.full.front(), self.front.as_ref())
        else {
            return false;
        };
        if full.len() != first.layout.keys.len() {
            return false;
        }
        let (cols, layout) = rule.project(&first.layout, self.thin.back().map(|b| &b.layout));
        let values: Vec<f64> = cols.iter().map(|&c| full[c as usize]).collect();
        let t_ms = first.t(0);
        match self.thin.back_mut() {
            Some(b) if Arc::ptr_eq(&b.layout, &layout) && b.fits(t_ms) => b.push(t_ms, &values),
            last => {
                if let Some(b) = last {
                    b.close();
                }
                self.thin.push_back(Block::new(layout, t_ms, &values));
            }
        }
        // Out of the full part and counted in the thin part: the point keeps its number.
        self.take_front_full();
        self.thin_len += 1;
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
            return n + b.count_until(t_ms);
        }
        n
    }
}
