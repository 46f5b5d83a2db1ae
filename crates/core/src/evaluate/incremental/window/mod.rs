//! One window's incremental state: per series its first sample and sample count (the
//! newest sample is shared by every window, `last`), and its resets if it has any; per
//! gauge group its running statistics; per model its span. A point
//! entering costs its columns; a point leaving costs its columns plus one decode of the
//! point after it (the window's new oldest point), whatever the window's length.

pub(super) mod saved;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use super::gauge::GaugeState;
use super::last::Lasts;
use super::plan::{Catalog, Feed, Plan, slot_in};
use crate::canonical::GaugeKind;
use crate::evaluate::promql::RangeAcc;
use crate::evaluate::range::{ModelRange, RangeView, Span, model_entry};
use crate::evaluate::{KvThresholds, Thin};
#[cfg(doc)]
use crate::window::Kept;
use crate::window::{Layout, TargetWindows};

/// A point being entered: decoded once, shared by every window.
pub(super) struct Entering<'a> {
    pub seq: u64,
    pub t_ms: i64,
    pub layout: &'a Arc<Layout>,
    pub plan: &'a Arc<Plan>,
    pub values: &'a [f64],
    /// Each of `plan.groups`' value at this point.
    pub gauges: &'a [f64],
    /// Per column, the value before a reset at this point ([`Lasts::step`]).
    pub resets: &'a [Option<f64>],
}

/// The window's oldest point, decoded: what leaves next, and the base for decoding the
/// point after it.
#[derive(Debug)]
struct Cursor {
    seq: u64,
    t_ms: i64,
    /// The layout `values` were decoded with (the point's full or thin form).
    layout: Arc<Layout>,
    plan: Arc<Plan>,
    values: Vec<f64>,
}

/// One series in one window: what differs between windows (the newest sample is shared,
/// see `last`). Empty when `n` is 0.
#[derive(Debug, Clone, Copy)]
struct SeriesState {
    first_t: i64,
    first_v: f64,
    /// Where the first sample sits among its scrape's columns: with `first_t`, the order
    /// the reference meets the series in, which is the order sums over shards add in. The
    /// column for a whole window; for a thin one, the rank among the columns it keeps,
    /// which is the same in a scrape's full and thin forms.
    first_order: u32,
    n: u32,
}

impl SeriesState {
    const EMPTY: SeriesState = SeriesState { first_t: 0, first_v: 0.0, first_order: 0, n: 0 };

    fn is_empty(&self) -> bool {
        self.n == 0
    }
}

/// (time of the sample after a reset, value before it), oldest first: the correction is
/// their sum in this order, exactly as [`RangeAcc::push`] adds them.
type Resets = VecDeque<(i64, f64)>;

/// Drops the resets at a sample no newer than the series' new first one: they are no
/// longer between two samples of the range.
fn trim(resets: &mut HashMap<u32, Resets>, slot: u32, first_t: i64) {
    // Most windows hold no reset: skip the hashing.
    if resets.is_empty() {
        return;
    }
    if let Some(r) = resets.get_mut(&slot) {
        while r.front().is_some_and(|r| r.0 <= first_t) {
            r.pop_front();
        }
        if r.is_empty() {
            resets.remove(&slot);
        }
    }
}

/// Heap bytes of a window's state by part.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct HeapParts {
    /// Per series: first sample, count, resets, and a thin window's slot map.
    pub series: usize,
    /// The oldest point, decoded.
    pub cursor: usize,
    /// Gauge statistics and model spans.
    pub gauges: usize,
}

/// Where leaving points hand off what they carried.
#[derive(Debug, Default)]
struct Pending {
    series: Vec<u32>,
    groups: Vec<u32>,
    models: Vec<u32>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.series.is_empty() && self.groups.is_empty() && self.models.is_empty()
    }
}

/// One window over one target.
#[derive(Debug)]
pub(super) struct WindowState {
    pub range_ms: i64,
    tail: Option<Cursor>,
    /// The newest point entered; meaningful while `tail` is set.
    last_seq: u64,
    series: Vec<SeriesState>,
    /// The resets of the series (by slot in `series`) that have any: most have none.
    resets: HashMap<u32, Resets>,
    groups: Vec<Option<GaugeState>>,
    spans: Vec<Option<Span>>,
    /// For an alert-only window, the series it keeps; the others never enter its state.
    thin: Option<Thin>,
    /// A thin window's slots: catalog id → index in `series` ([`NOT_KEPT`], or unset past
    /// the end: not looked at yet), and index → catalog id. A whole window indexes
    /// `series` by catalog id; a thin one keeps a few dozen of a few hundred series, so it
    /// pays four bytes per catalog id instead of a slot.
    local: Vec<u32>,
    ids: Vec<u32>,
    /// For an alert-only window, the columns it takes of the plans it met last
    /// ([`Kept::mask`]: of a histogram kept for its SLO brackets, only the buckets they read,
    /// which depends on the layout's other bounds). A point's full and thin forms give the
    /// same series, so it enters and leaves with the same ones.
    taken: Vec<(Arc<Plan>, Taken)>,
}

/// Which columns of a plan a thin window takes, one bit each.
type Taken = Arc<[u64]>;

/// How many plans' [`Taken`] a window keeps: the newest point's, the oldest one's and the one
/// after it, with room for a layout change.
const TAKEN_PLANS: usize = 4;

/// Whether column `c` is taken (every column of a whole window, `None`).
fn takes(taken: &Option<Taken>, c: usize) -> bool {
    taken.as_ref().is_none_or(|bits| bits[c / 64] >> (c % 64) & 1 == 1)
}

/// Where column `c` sits in the order of [`WindowState::orders`].
fn order_of(orders: &Option<Vec<u32>>, c: usize) -> u32 {
    orders.as_ref().map_or(c as u32, |o| o[c])
}

const NOT_KEPT: u32 = u32::MAX;
const UNSEEN: u32 = u32::MAX - 1;

/// The slot of series `id` in a window's `series` (see `WindowState::local`), if it has one.
fn index(thin: bool, local: &[u32], id: u32) -> Option<usize> {
    if !thin {
        return Some(id as usize);
    }
    local.get(id as usize).filter(|&&l| l < UNSEEN).map(|&l| l as usize)
}

fn slot<T>(v: &mut Vec<Option<T>>, id: u32) -> &mut Option<T> {
    let i = id as usize;
    if v.len() <= i {
        v.resize_with(i + 1, || None);
    }
    &mut v[i]
}

impl WindowState {
    pub fn new(range_ms: i64, thin: Option<Thin>) -> Self {
        WindowState {
            range_ms,
            tail: None,
            last_seq: 0,
            series: Vec::new(),
            resets: HashMap::new(),
            groups: Vec::new(),
            spans: Vec::new(),
            thin,
            local: Vec::new(),
            ids: Vec::new(),
            taken: Vec::new(),
        }
    }

    pub fn clear(&mut self) {
        *self = WindowState::new(self.range_ms, self.thin.take());
    }

    pub fn thin(&self) -> Option<&Thin> {
        self.thin.as_ref()
    }

    /// The slot of series `id`, made on first sight; `None` when the window does not keep it.
    fn slot_of(&mut self, catalog: &Catalog, plan: &Plan, id: u32) -> Option<usize> {
        let Some(thin) = &self.thin else { return Some(id as usize) };
        let i = id as usize;
        slot_in(&mut self.local, i, plan.ids(), || UNSEEN);
        if self.local[i] == UNSEEN {
            self.local[i] = if thin.keeps(catalog.keys[i].quantity) {
                self.ids.push(id);
                self.ids.len() as u32 - 1
            } else {
                NOT_KEPT
            };
        }
        (self.local[i] != NOT_KEPT).then_some(self.local[i] as usize)
    }

    /// The columns of `plan` a thin window takes; `None` for a whole window (every column).
    fn taken(&mut self, catalog: &Catalog, plan: &Arc<Plan>) -> Option<Taken> {
        let thin = self.thin.as_ref()?;
        if let Some((_, bits)) = self.taken.iter().find(|(p, _)| Arc::ptr_eq(p, plan)) {
            return Some(bits.clone());
        }
        let keys = plan.feeds.iter().map(|f| match *f {
            Feed::Series(id) => Some(&*catalog.keys[id as usize]),
            Feed::Gauge(_) => None,
        });
        let mask = thin.kept().mask_of(keys);
        let mut bits = vec![0u64; mask.len().div_ceil(64)];
        for (c, _) in mask.iter().enumerate().filter(|(_, m)| **m) {
            bits[c / 64] |= 1 << (c % 64);
        }
        let bits: Taken = bits.into();
        if self.taken.len() == TAKEN_PLANS {
            self.taken.remove(0);
        }
        self.taken.push((plan.clone(), bits.clone()));
        Some(bits)
    }

    /// The catalog id of slot `i`.
    fn id_at(&self, i: usize) -> u32 {
        if self.thin.is_some() { self.ids[i] } else { i as u32 }
    }

    fn keeps_group(&self, catalog: &Catalog, group: u32) -> bool {
        self.thin.as_ref().is_none_or(|t| t.keeps_gauge(catalog.group_kind(group)))
    }

    /// For a thin window, each column's rank among the columns of `plan` it keeps (what
    /// `SeriesState::first_order` holds); `None` for a whole window, which uses the column.
    fn orders(&mut self, catalog: &Catalog, plan: &Arc<Plan>) -> Option<Vec<u32>> {
        let taken = Some(self.taken(catalog, plan)?);
        let mut rank = 0;
        let mut out = Vec::with_capacity(plan.feeds.len());
        for (col, feed) in plan.feeds.iter().enumerate() {
            out.push(rank);
            if let Feed::Series(id) = *feed
                && takes(&taken, col)
                && self.slot_of(catalog, plan, id).is_some()
            {
                rank += 1;
            }
        }
        Some(out)
    }

    /// The oldest point's sequence number and time.
    pub fn oldest(&self) -> Option<(u64, i64)> {
        self.tail.as_ref().map(|c| (c.seq, c.t_ms))
    }

    pub fn enter(&mut self, p: &Entering<'_>, catalog: &Catalog, kv: &KvThresholds) {
        if self.tail.is_none() {
            self.tail = Some(Cursor {
                seq: p.seq,
                t_ms: p.t_ms,
                layout: p.layout.clone(),
                plan: p.plan.clone(),
                values: p.values.to_vec(),
            });
        }
        self.last_seq = p.seq;
        let taken = self.taken(catalog, p.plan);
        let mut rank = 0;
        for (col, feed) in p.plan.feeds.iter().enumerate() {
            let Feed::Series(id) = *feed else { continue };
            if !takes(&taken, col) {
                continue;
            }
            let Some(i) = self.slot_of(catalog, p.plan, id) else { continue };
            let order = if self.thin.is_some() { rank } else { col as u32 };
            rank += 1;
            let v = p.values[col];
            // A whole window's slots are catalog ids; a thin one's are its own, a few dozen.
            let ids = if self.thin.is_some() { 0 } else { p.plan.ids() };
            let s = slot_in(&mut self.series, i, ids, || SeriesState::EMPTY);
            if s.is_empty() {
                *s = SeriesState { first_t: p.t_ms, first_v: v, first_order: order, n: 1 };
            } else {
                s.n += 1;
                if let Some(before) = p.resets[col] {
                    self.resets.entry(i as u32).or_default().push_back((p.t_ms, before));
                }
            }
        }
        for (&g, &v) in p.plan.groups.iter().zip(p.gauges) {
            if !self.keeps_group(catalog, g) {
                continue;
            }
            let finite_only = catalog.group_kind(g) == GaugeKind::KvCacheUsage;
            slot(&mut self.groups, g).get_or_insert_with(|| GaugeState::new(finite_only)).push(p.seq, v, kv);
        }
        for &m in p.plan.models.iter() {
            match slot(&mut self.spans, m) {
                Some(s) => {
                    s.last_ms = p.t_ms;
                    s.scrapes += 1;
                }
                s @ None => *s = Some(Span { first_ms: p.t_ms, last_ms: p.t_ms, scrapes: 1 }),
            }
        }
    }

    /// Drops the oldest point. `false` when the store no longer holds the point after it
    /// (the ring dropped more than one point this window still held): the caller rebuilds.
    /// Adds one to `searches` when it had to search forward for a next sample.
    pub fn pop(
        &mut self,
        store: &TargetWindows,
        catalog: &mut Catalog,
        kv: &KvThresholds,
        searches: &mut usize,
    ) -> bool {
        let Some(tail) = self.tail.as_ref() else { return true };
        let (seq, old_plan) = (tail.seq, tail.plan.clone());
        let mut leaving = Vec::new();
        old_plan.gauge_values(catalog, &tail.values, &mut leaving);
        if seq == self.last_seq {
            self.clear();
            return true;
        }
        let Some((t1, layout1)) = store.point_at(seq + 1) else { return false };
        let plan1 = catalog.plan(layout1);
        let orders = self.orders(catalog, &plan1);
        let (taken_old, taken1) = (self.taken(catalog, &old_plan), self.taken(catalog, &plan1));
        let Some(tail) = self.tail.as_mut() else { return false };
        if !store.decode_next(seq + 1, Some(&tail.layout), &mut tail.values) {
            return false;
        }
        (tail.seq, tail.t_ms, tail.plan) = (seq + 1, t1, plan1.clone());
        if !Arc::ptr_eq(&tail.layout, layout1) {
            tail.layout = layout1.clone();
        }
        let mut next_gauges = Vec::new();
        plan1.gauge_values(catalog, &tail.values, &mut next_gauges);
        let mut pending = Pending::default();
        for &(id, col) in old_plan.by_series.iter() {
            if !takes(&taken_old, col as usize) {
                continue;
            }
            let Some(i) = index(self.thin.is_some(), &self.local, id) else { continue };
            let Some(s) = self.series.get_mut(i).filter(|s| !s.is_empty()) else { continue };
            s.n -= 1;
            if s.n == 0 {
                if !self.resets.is_empty() {
                    self.resets.remove(&(i as u32));
                }
            } else if let Some(c) = plan1.column_of(id).filter(|&c| takes(&taken1, c)) {
                (s.first_t, s.first_v, s.first_order) = (t1, tail.values[c], order_of(&orders, c));
                trim(&mut self.resets, i as u32, t1);
            } else {
                pending.series.push(id);
            }
        }
        for (&g, &v) in old_plan.groups.iter().zip(&leaving) {
            let next = plan1.groups.iter().position(|&x| x == g).map(|i| next_gauges[i]);
            let Some(state) = self.groups.get_mut(g as usize).and_then(Option::as_mut) else { continue };
            state.pop(seq, v, next, kv);
            if state.is_empty() {
                self.groups[g as usize] = None;
            } else if next.is_none() {
                pending.groups.push(g);
            }
        }
        for &m in old_plan.models.iter() {
            let Some(span) = self.spans[m as usize].as_mut() else { continue };
            span.scrapes -= 1;
            if span.scrapes == 0 {
                self.spans[m as usize] = None;
            } else if plan1.has_model(m) {
                span.first_ms = t1;
            } else {
                pending.models.push(m);
            }
        }
        if pending.is_empty() {
            return true;
        }
        *searches += 1;
        self.resolve(pending, store, catalog)
    }

    /// Finds, after the new oldest point, the next sample of each series, group and model
    /// that the leaving point carried but the new oldest one does not (series that vanish
    /// for a while and return). Rare; decodes forward.
    fn resolve(&mut self, mut pending: Pending, store: &TargetWindows, catalog: &mut Catalog) -> bool {
        let Some(tail) = self.tail.as_ref() else { return true };
        let (mut values, mut prev) = (tail.values.clone(), tail.layout.clone());
        let mut gauges = Vec::new();
        for seq in tail.seq + 1..=self.last_seq {
            let Some((t, layout)) = store.point_at(seq) else { return false };
            if !store.decode_next(seq, Some(&prev), &mut values) {
                return false;
            }
            if !Arc::ptr_eq(&prev, layout) {
                prev = layout.clone();
            }
            let plan = catalog.plan(layout);
            let orders = if pending.series.is_empty() { None } else { self.orders(catalog, &plan) };
            let taken = if pending.series.is_empty() { None } else { self.taken(catalog, &plan) };
            pending.series.retain(|&id| match plan.column_of(id).filter(|&c| takes(&taken, c)) {
                Some(c) => {
                    if let Some(i) = index(self.thin.is_some(), &self.local, id)
                        && let Some(s) = self.series.get_mut(i).filter(|s| !s.is_empty())
                    {
                        (s.first_t, s.first_v, s.first_order) = (t, values[c], order_of(&orders, c));
                        trim(&mut self.resets, i as u32, t);
                    }
                    false
                }
                None => true,
            });
            if pending.groups.iter().any(|&g| plan.has_group(g)) {
                plan.gauge_values(catalog, &values, &mut gauges);
                pending.groups.retain(|&g| match plan.groups.iter().position(|&x| x == g) {
                    Some(i) => {
                        if let Some(state) = self.groups[g as usize].as_mut() {
                            state.set_first(gauges[i]);
                        }
                        false
                    }
                    None => true,
                });
            }
            pending.models.retain(|&m| {
                if !plan.has_model(m) {
                    return true;
                }
                if let Some(span) = self.spans[m as usize].as_mut() {
                    span.first_ms = t;
                }
                false
            });
            if pending.is_empty() {
                return true;
            }
        }
        // Counts said a later sample exists; not finding it means the state is off.
        false
    }

    /// Heap bytes this window's state owns, by part (the layouts it holds are the store's).
    pub fn heap_parts(&self) -> HeapParts {
        use std::mem::size_of;
        // A map slot per series with resets (key, deque, control byte), and the deques.
        let resets: usize = self.resets.capacity() * (size_of::<(u32, Resets)>() + 1)
            + self.resets.values().map(|r| r.capacity() * size_of::<(i64, f64)>()).sum::<usize>();
        let groups: usize = self.groups.iter().flatten().map(GaugeState::heap_bytes).sum();
        HeapParts {
            series: resets
                + self.series.capacity() * size_of::<SeriesState>()
                + (self.local.capacity() + self.ids.capacity()) * size_of::<u32>()
                + self.taken.iter().map(|(_, bits)| bits.len() * size_of::<u64>() + 16).sum::<usize>(),
            cursor: self.tail.as_ref().map_or(0, |c| c.values.capacity() * size_of::<f64>()),
            gauges: groups
                + self.groups.capacity() * size_of::<Option<GaugeState>>()
                + self.spans.capacity() * size_of::<Option<Span>>(),
        }
    }

    /// The window's content as the reference [`RangeView::collect`] would group it.
    pub fn view(&self, catalog: &Catalog, lasts: &Lasts) -> RangeView {
        let mut models: BTreeMap<Arc<str>, ModelRange> = BTreeMap::new();
        let mut order: Vec<Vec<(i64, u32, u32)>> = vec![Vec::new(); catalog.model_names.len()];
        for (i, s) in self.series.iter().enumerate() {
            if !s.is_empty() {
                let id = self.id_at(i);
                order[catalog.series_model[id as usize] as usize].push((s.first_t, s.first_order, i as u32));
            }
        }
        for (model, mut ids) in order.into_iter().enumerate() {
            if ids.is_empty() {
                continue;
            }
            ids.sort_unstable();
            let m = model_entry(&mut models, &catalog.model_names[model]);
            m.series = ids
                .into_iter()
                .filter_map(|(_, _, i)| {
                    let s = &self.series[i as usize];
                    let id = self.id_at(i as usize);
                    let last = lasts.get(id)?;
                    let resets = if self.resets.is_empty() { None } else { self.resets.get(&i) };
                    let correction = resets.map_or(0.0, |r| r.iter().fold(0.0, |c, r| c + r.1));
                    let acc =
                        RangeAcc::from_parts((s.first_t, s.first_v), (last.t_ms, last.v), s.n as usize, correction);
                    Some((catalog.keys[id as usize].clone(), acc))
                })
                .collect();
        }
        for (g, state) in self.groups.iter().enumerate() {
            let Some(state) = state else { continue };
            let (model, kind) = catalog.group_keys[g];
            let m = model_entry(&mut models, &catalog.model_names[model as usize]);
            if let Some(g) = state.range() {
                m.gauges.insert(kind, g);
            }
        }
        for (model, span) in self.spans.iter().enumerate() {
            if let Some(span) = span {
                model_entry(&mut models, &catalog.model_names[model]).span = Some(*span);
            }
        }
        RangeView::from_models(models)
    }
}
