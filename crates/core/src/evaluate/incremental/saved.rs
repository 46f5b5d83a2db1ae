//! The incremental state of a target's windows as a `state_dir` snapshot keeps it, so that
//! a restored daemon goes on from it instead of reading every stored point again
//! (docs/architecture.md#state-that-survives-restarts).
//!
//! The state follows its store by point sequence number, and a restored store numbers its
//! points afresh. So the state is saved with each sequence number as an offset from the
//! saved store's oldest point, together with how many points the store held; restored over
//! the store those points make, an offset maps to the same point (checked by its time).
//! What the store holds anyway is not saved: each window's oldest point and the newest
//! point read are decoded from it again, and each series' newest sample takes its layout
//! from the point at its time. A state that does not match the config, or whose indices or
//! points do not resolve, is refused, and the evaluation starts over from the store as it
//! would without a snapshot.

use serde::{Deserialize, Serialize};

use super::last::Lasts;
use super::plan::{Catalog, SavedCatalog};
use super::window::WindowState;
use super::window::saved::SavedWindow;
use super::{EvalConfig, Incremental};
use crate::evaluate::Thin;
use crate::window::TargetWindows;

/// Bumped when the saved shape or its meaning changes: a state of another format is not
/// restored (the windows start over from the store instead).
pub const FORMAT: u32 = 1;

/// One target's incremental state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedEvaluation {
    pub format: u32,
    /// Points the store held when saved (offsets count from its oldest), and the newest
    /// one's time: a restored store may have dropped the oldest and taken new ones since.
    points: u64,
    newest_ms: i64,
    /// The next point to read, as an offset; the time of the one before it, if any.
    next: u64,
    head_t: Option<i64>,
    now_ms: i64,
    catalog: SavedCatalog,
    lasts: Vec<Option<(i64, f64)>>,
    windows: Vec<SavedWindow>,
}

impl Incremental {
    /// Whether the state has been advanced once: before, there is nothing to save.
    pub fn has_evaluated(&self) -> bool {
        self.now_ms != i64::MIN
    }

    /// The state as a snapshot keeps it, taken with `store` as it is now (the two must be
    /// saved together). The points the store dropped since the last tick are taken out of
    /// the windows first, as the next tick would (the snapshot does not hold them); `None`
    /// before the first tick, or if a window still holds a dropped point.
    pub fn saved(&mut self, store: &mut TargetWindows) -> Option<SavedEvaluation> {
        if !self.has_evaluated() {
            return None;
        }
        self.advance(store, self.now_ms);
        let range = store.seq_range();
        if !self.follows(store, self.now_ms)
            || self.windows.iter().any(|(_, w)| w.oldest().is_some_and(|(s, _)| s < range.start))
        {
            return None;
        }
        let offset = move |seq: u64| seq.saturating_sub(range.start);
        Some(SavedEvaluation {
            format: FORMAT,
            points: range.end - range.start,
            newest_ms: range.end.checked_sub(1).and_then(|s| store.point_at(s)).map_or(i64::MIN, |(t, _)| t),
            next: offset(self.next_seq),
            head_t: self.head_t,
            now_ms: self.now_ms,
            catalog: self.catalog.saved(),
            lasts: self.lasts.saved(),
            windows: self.windows.iter().map(|(_, w)| w.saved(offset)).collect(),
        })
    }

    /// The state `saved` describes for `cfg`, over `store` as the snapshot's windows
    /// restored it; `None` when it cannot be used (another format or config, or an index
    /// or point that does not resolve), and the evaluation starts over from the store.
    /// From then on `store` keeps the points it drops until the first advance has taken
    /// them out of the windows, as between two ticks.
    pub fn restored(saved: &SavedEvaluation, cfg: &EvalConfig, store: &mut TargetWindows) -> Option<Incremental> {
        let range = store.seq_range();
        // The saved points the store still holds: it trimmed the oldest to its windows, and
        // scrapes since the restore come after them.
        let held = store.seq_after(saved.newest_ms) - range.start;
        if saved.format != FORMAT || saved.windows.len() != cfg.windows.len() || held > saved.points {
            return None;
        }
        let trimmed = saved.points - held;
        let seq = move |off: u64| off.checked_sub(trimmed).map(|o| range.start + o).filter(|&s| s <= range.end);
        let mut inc = Incremental::new(cfg);
        let mut catalog = Catalog::restored(&saved.catalog)?;
        if saved.lasts.len() > catalog.keys.len() {
            return None;
        }
        for ((w, state), s) in inc.windows.iter_mut().zip(&saved.windows) {
            if s.range_ms != w.millis() {
                return None;
            }
            *state = WindowState::restored(s, Thin::of(cfg, *w), store, &mut catalog, seq)?;
        }
        inc.lasts = Lasts::restored(&saved.lasts, &mut catalog, store);
        inc.next_seq = seq(saved.next)?;
        if let Some(head) = inc.next_seq.checked_sub(1).filter(|&s| s >= range.start) {
            let (t, layout) = store.point_at(head)?;
            if Some(t) != saved.head_t || !store.decode_at(head, &mut inc.head_values) {
                return None;
            }
            inc.head_layout = Some(layout.clone());
        }
        inc.head_t = saved.head_t;
        inc.catalog = catalog;
        inc.epoch = store.epoch();
        inc.now_ms = saved.now_ms;
        if !inc.follows(store, inc.now_ms) {
            return None;
        }
        store.keep_dropped();
        Some(inc)
    }
}
