//! The capacity estimator's knobs.

/// The estimator's knobs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Fit {
    /// Rate bins per factor of ten: 32 gives bins 7.5 % wide, about the Poisson noise of a
    /// one-minute window's rate near a knee of a few requests/s (240 arrivals: ±6.5 %).
    /// Finer bins would resolve noise, not load; coarser ones misplace a cliff (below).
    pub bins_per_decade: f64,
    /// Posterior draws for the spread.
    pub draws: usize,
    pub seed: u64,
    /// Expected bad requests at the objective that an estimate, and a failing load, rest
    /// on: the history holds at least `min_bad / (1 − objective)` requests before there is
    /// an estimate, and the fit counts as failing only where that many requests lie under
    /// the objective (10 → 200 requests at 0.95).
    pub min_bad: f64,
    /// Consecutive intervals that share one bootstrap weight: a window of 1m over intervals
    /// 15 s apart counts each request in four of them.
    pub block: usize,
    /// Positions of the grid a draw chooses from (its phase, in steps of a bin's share):
    /// the history's cells are this much finer than a bin.
    pub phases: usize,
    /// Settling shares a draw chooses from: the middles of this many equal parts of 0 to 1.
    pub settle_levels: usize,
    /// Bootstrap classes the blocks are dealt round (at most [`MAX_CLASSES`]).
    pub classes: usize,
}

/// The most bootstrap classes a [`Fit`] may have.
pub const MAX_CLASSES: usize = 16;

impl Default for Fit {
    fn default() -> Fit {
        Fit {
            bins_per_decade: 32.0,
            draws: 200,
            seed: 0x00ca_9ac1,
            min_bad: 10.0,
            block: 4,
            phases: 8,
            settle_levels: 32,
            classes: MAX_CLASSES,
        }
    }
}

impl Fit {
    /// [`Fit::phases`], at least one.
    pub fn phases(&self) -> usize {
        self.phases.max(1)
    }

    /// [`Fit::classes`], from one to [`MAX_CLASSES`].
    pub fn classes(&self) -> usize {
        self.classes.clamp(1, MAX_CLASSES)
    }
}
