//! What each column of a layout feeds, resolved once per layout and shared by every
//! window: a series id, or a (model, gauge) group whose shards combine into one value per
//! point.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::canonical::GaugeKind;
use crate::kahan::KahanSum;
use crate::window::saved::SavedLayout;
use crate::window::{Layout, Quantity, SeriesKey};

/// What one column feeds.
#[derive(Debug, Clone, Copy)]
pub(super) enum Feed {
    /// A series, by catalog id.
    Series(u32),
    /// A gauge group, by its index in [`Plan::groups`].
    Gauge(u32),
}

/// One layout, resolved.
#[derive(Debug)]
pub(super) struct Plan {
    pub feeds: Box<[Feed]>,
    /// The layout's gauge groups (catalog ids), in first-column order: the order the
    /// reference adds them in.
    pub groups: Box<[u32]>,
    /// The models the layout carries (catalog ids), sorted.
    pub models: Box<[u32]>,
    /// (series id, column), sorted by id: where a series sits in this layout.
    pub by_series: Box<[(u32, u32)]>,
    /// Gauge group ids, sorted: whether this layout carries a group.
    pub group_set: Box<[u32]>,
}

impl Plan {
    /// Catalog ids up to this layout's highest: what a vector indexed by id needs to hold
    /// every series of the layout.
    pub fn ids(&self) -> usize {
        self.by_series.last().map_or(0, |&(id, _)| id as usize + 1)
    }

    pub fn column_of(&self, series: u32) -> Option<usize> {
        self.by_series.binary_search_by_key(&series, |e| e.0).ok().map(|i| self.by_series[i].1 as usize)
    }

    /// Whether this layout carries gauge group `group` (a catalog id).
    pub fn has_group(&self, group: u32) -> bool {
        self.group_set.binary_search(&group).is_ok()
    }

    pub fn has_model(&self, model: u32) -> bool {
        self.models.binary_search(&model).is_ok()
    }

    /// Each group's value at one point, in [`Plan::groups`] order: shards added in column
    /// order with Prometheus's compensated sum; KV usage is their mean, the rest the sum.
    pub fn gauge_values(&self, catalog: &Catalog, values: &[f64], out: &mut Vec<f64>) {
        let mut sums = vec![KahanSum::default(); self.groups.len()];
        for (feed, &v) in self.feeds.iter().zip(values) {
            if let Feed::Gauge(g) = *feed {
                sums[g as usize].add(v);
            }
        }
        out.clear();
        out.extend(self.groups.iter().zip(&sums).map(|(&g, s)| {
            let v = if catalog.group_kind(g) == GaugeKind::KvCacheUsage { s.mean() } else { s.sum() };
            v.unwrap_or(f64::NAN)
        }));
    }
}

/// Slot `i` of a vector indexed by id, made with `fill` where missing. A first point fills
/// ids one at a time, and a vector left to double would keep up to half its slots unused
/// for as long as the target lives (at 10 000 targets, a tenth of a GiB): it grows at once
/// to `ids` (the plan's [`Plan::ids`]), exactly.
pub(super) fn slot_in<T>(v: &mut Vec<T>, i: usize, ids: usize, fill: impl FnMut() -> T) -> &mut T {
    if v.len() <= i {
        v.reserve_exact(ids.max(i + 1) - v.len());
        v.resize_with(i + 1, fill);
    }
    &mut v[i]
}

/// [`Catalog`]'s ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedCatalog {
    pub(super) models: Vec<String>,
    pub(super) keys: SavedLayout,
    /// (model id, gauge kind by name).
    pub(super) groups: Vec<(u32, String)>,
}

/// Ids of every series, model and gauge group a target has shown, and the plans of its
/// layouts.
///
/// Ids are never reused, so a window's per-id slots stay valid across layouts. The
/// catalog grows with the distinct series a target ever shows (a few hundred per model);
/// [`Catalog::should_compact`] tells the owner when most of it is stale.
#[derive(Debug, Default)]
pub(super) struct Catalog {
    /// Shared with every view: a tick clones no key.
    pub keys: Vec<Arc<SeriesKey>>,
    /// The model of each series id.
    pub series_model: Vec<u32>,
    models: HashMap<Arc<str>, u32>,
    pub model_names: Vec<Arc<str>>,
    groups: HashMap<(u32, GaugeKind), u32>,
    /// (model id, kind) of each gauge group id.
    pub group_keys: Vec<(u32, GaugeKind)>,
    plans: HashMap<usize, (Arc<Layout>, Arc<Plan>)>,
    plans_at_prune: usize,
}

impl Catalog {
    /// Whether ids of series no longer shown outnumber the live ones (`live`: the newest
    /// layout's columns) enough that starting over is worth one full pass.
    pub fn should_compact(&self, live: usize) -> bool {
        self.keys.len() > 4 * live + 4096
    }

    /// Heap bytes, roughly: ids, keys (their shard strings) and plans.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let keys: usize = self.keys.iter().map(|k| k.shard.capacity()).sum();
        let plans: usize = self.plans.values().map(|(_, p)| p.feeds.len() * (size_of::<Feed>() + 8) + 64).sum();
        keys + self.keys.len() * (size_of::<SeriesKey>() + 16)
            + self.keys.capacity() * size_of::<Arc<SeriesKey>>()
            + self.series_model.capacity() * 4
            + self.group_keys.capacity() * 16
            + plans
    }

    /// The ids as a snapshot keeps them: model names, series keys and gauge groups, each
    /// in id order (plans are rebuilt from the restored store's layouts).
    pub fn saved(&self) -> SavedCatalog {
        let keys = Layout {
            keys: self.keys.iter().map(|k| (**k).clone()).collect(),
            created: vec![None; self.keys.len()].into(),
            process_start: None,
        };
        SavedCatalog {
            models: self.model_names.iter().map(|m| m.to_string()).collect(),
            keys: SavedLayout::of(&keys),
            groups: self.group_keys.iter().map(|&(m, k)| (m, k.as_str().to_string())).collect(),
        }
    }

    /// The catalog `s` describes; `None` if a name or index does not resolve.
    pub fn restored(s: &SavedCatalog) -> Option<Catalog> {
        let mut c = Catalog::default();
        for m in &s.models {
            let name: Arc<str> = m.as_str().into();
            if c.models.insert(name.clone(), c.model_names.len() as u32).is_some() {
                return None;
            }
            c.model_names.push(name);
        }
        let mut seen = std::collections::HashSet::new();
        for key in s.keys.layout().ok()?.keys.into_vec() {
            let model = *c.models.get(&key.model)?;
            let key = Arc::new(SeriesKey { model: c.model_names[model as usize].clone(), ..key });
            if !seen.insert(key.clone()) {
                return None;
            }
            c.keys.push(key);
            c.series_model.push(model);
        }
        for (model, kind) in &s.groups {
            let kind = GaugeKind::ALL.iter().copied().find(|k| k.as_str() == kind)?;
            if *model as usize >= c.model_names.len()
                || c.groups.insert((*model, kind), c.group_keys.len() as u32).is_some()
            {
                return None;
            }
            c.group_keys.push((*model, kind));
        }
        Some(c)
    }

    pub fn group_kind(&self, group: u32) -> GaugeKind {
        self.group_keys[group as usize].1
    }

    fn model(&mut self, name: &Arc<str>) -> u32 {
        if let Some(&id) = self.models.get(name) {
            return id;
        }
        let id = self.model_names.len() as u32;
        self.model_names.push(name.clone());
        self.models.insert(name.clone(), id);
        id
    }

    /// The plan of `layout`, built on first sight.
    pub fn plan(&mut self, layout: &Arc<Layout>) -> Arc<Plan> {
        let ptr = Arc::as_ptr(layout) as usize;
        if let Some((l, p)) = self.plans.get(&ptr)
            && Arc::ptr_eq(l, layout)
        {
            return p.clone();
        }
        let plan = Arc::new(self.build(layout));
        if self.plans.len() >= 2 * self.plans_at_prune.max(8) {
            // Layouts nobody else holds any more (the store dropped their points).
            self.plans.retain(|_, (l, _)| Arc::strong_count(l) > 1);
            self.plans_at_prune = self.plans.len();
        }
        self.plans.insert(ptr, (layout.clone(), plan.clone()));
        plan
    }

    fn build(&mut self, layout: &Layout) -> Plan {
        // Which id a key has is asked only here, when a layout is first seen: the map is
        // built for it from `keys` and dropped after, rather than held beside the keys in
        // every target's memory (≈ 4 KiB a target).
        let mut series: HashMap<Arc<SeriesKey>, u32> =
            self.keys.iter().enumerate().map(|(id, k)| (k.clone(), id as u32)).collect();
        let mut feeds = Vec::with_capacity(layout.keys.len());
        let mut groups: Vec<u32> = Vec::new();
        let mut local: HashMap<u32, u32> = HashMap::new();
        let mut models: Vec<u32> = Vec::new();
        let mut by_series = Vec::new();
        for (col, key) in layout.keys.iter().enumerate() {
            let model = self.model(&key.model);
            models.push(model);
            if let Quantity::Gauge(kind) = key.quantity {
                let next = self.group_keys.len() as u32;
                let g = *self.groups.entry((model, kind)).or_insert(next);
                if g == next {
                    self.group_keys.push((model, kind));
                }
                let l = *local.entry(g).or_insert_with(|| {
                    groups.push(g);
                    groups.len() as u32 - 1
                });
                feeds.push(Feed::Gauge(l));
                continue;
            }
            let id = match series.get(key) {
                Some(&id) => id,
                None => {
                    let id = self.keys.len() as u32;
                    let key = Arc::new(key.clone());
                    series.insert(key.clone(), id);
                    self.keys.push(key);
                    self.series_model.push(model);
                    id
                }
            };
            by_series.push((id, col as u32));
            feeds.push(Feed::Series(id));
        }
        // Ids are added a layout at a time and rarely after the first: no room kept for more.
        self.keys.shrink_to_fit();
        self.series_model.shrink_to_fit();
        self.group_keys.shrink_to_fit();
        models.sort_unstable();
        models.dedup();
        by_series.sort_unstable();
        let mut group_set = groups.clone();
        group_set.sort_unstable();
        Plan {
            feeds: feeds.into(),
            groups: groups.into(),
            models: models.into(),
            by_series: by_series.into(),
            group_set: group_set.into(),
        }
    }
}
