//! One window's state as a snapshot keeps it (`super::super::saved`): everything but the
//! oldest point's values, which the restored store decodes again.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{Cursor, GaugeState, NOT_KEPT, SeriesState, UNSEEN, WindowState};
use crate::evaluate::Thin;
use crate::evaluate::incremental::gauge::SavedGauge;
use crate::evaluate::incremental::plan::Catalog;
use crate::evaluate::range::Span;
use crate::window::TargetWindows;

/// One window's state ([`WindowState`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedWindow {
    pub(in crate::evaluate::incremental) range_ms: i64,
    /// The oldest point's offset and time.
    pub(in crate::evaluate::incremental) tail: Option<(u64, i64)>,
    pub(in crate::evaluate::incremental) last: u64,
    /// Per slot: first sample's time, value and order, and the sample count.
    pub(in crate::evaluate::incremental) series: Vec<(i64, f64, u32, u32)>,
    pub(in crate::evaluate::incremental) resets: Vec<(u32, Vec<(i64, f64)>)>,
    pub(in crate::evaluate::incremental) groups: Vec<Option<SavedGauge>>,
    /// Per model: first and last scrape's time, scrapes.
    pub(in crate::evaluate::incremental) spans: Vec<Option<(i64, i64, u64)>>,
    pub(in crate::evaluate::incremental) local: Vec<u32>,
    pub(in crate::evaluate::incremental) ids: Vec<u32>,
}

impl WindowState {
    /// The state, point sequence numbers as `offset` maps them.
    pub fn saved(&self, offset: impl Fn(u64) -> u64 + Copy) -> SavedWindow {
        SavedWindow {
            range_ms: self.range_ms,
            tail: self.tail.as_ref().map(|c| (offset(c.seq), c.t_ms)),
            last: offset(self.last_seq),
            series: self.series.iter().map(|s| (s.first_t, s.first_v, s.first_order, s.n)).collect(),
            resets: self.resets.iter().map(|(&i, r)| (i, r.iter().copied().collect())).collect(),
            groups: self.groups.iter().map(|g| g.as_ref().map(|g| g.saved(offset))).collect(),
            spans: self.spans.iter().map(|s| s.map(|s| (s.first_ms, s.last_ms, s.scrapes as u64))).collect(),
            local: self.local.clone(),
            ids: self.ids.clone(),
        }
    }

    /// The window `s` describes over `store` (its oldest point decoded there), sequence
    /// numbers as `seq` maps the saved offsets; `None` if an index is out of range or the
    /// oldest point is not where it was.
    pub fn restored(
        s: &SavedWindow,
        thin: Option<Thin>,
        store: &TargetWindows,
        catalog: &mut Catalog,
        seq: impl Fn(u64) -> Option<u64> + Copy,
    ) -> Option<WindowState> {
        let (keys, groups, models) = (catalog.keys.len(), catalog.group_keys.len(), catalog.model_names.len());
        let slots = if thin.is_some() {
            let bad_local = s.local.len() > keys
                || s.local.iter().any(|&l| l != NOT_KEPT && l != UNSEEN && l as usize >= s.ids.len());
            if bad_local || s.ids.iter().any(|&id| id as usize >= keys) {
                return None;
            }
            s.ids.len()
        } else {
            if !s.local.is_empty() || !s.ids.is_empty() {
                return None;
            }
            keys
        };
        if s.series.len() > slots || s.groups.len() > groups || s.spans.len() > models {
            return None;
        }
        if s.resets.iter().any(|(i, _)| *i as usize >= s.series.len()) {
            return None;
        }
        let tail = match s.tail {
            Some((off, t_ms)) => {
                let at = seq(off)?;
                let (t, layout) = store.point_at(at)?;
                let mut values = Vec::new();
                if t != t_ms || !store.decode_at(at, &mut values) {
                    return None;
                }
                let plan = catalog.plan(layout);
                Some(Cursor { seq: at, t_ms, layout: layout.clone(), plan, values })
            }
            None => None,
        };
        let groups = s
            .groups
            .iter()
            .map(|g| match g {
                Some(g) => GaugeState::restored(g, seq).map(Some),
                None => Some(None),
            })
            .collect::<Option<Vec<_>>>()?;
        Some(WindowState {
            range_ms: s.range_ms,
            tail,
            last_seq: seq(s.last)?,
            series: s
                .series
                .iter()
                .map(|&(first_t, first_v, first_order, n)| SeriesState { first_t, first_v, first_order, n })
                .collect(),
            resets: s.resets.iter().map(|(i, r)| (*i, r.iter().copied().collect())).collect::<HashMap<_, _>>(),
            groups,
            spans: s
                .spans
                .iter()
                .map(|s| s.map(|(first_ms, last_ms, scrapes)| Span { first_ms, last_ms, scrapes: scrapes as usize }))
                .collect(),
            thin,
            local: s.local.clone(),
            ids: s.ids.clone(),
            taken: Vec::new(),
        })
    }
}
