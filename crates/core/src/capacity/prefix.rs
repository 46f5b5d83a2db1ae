//! A table's cells as running sums, so that binning them at a grid phase costs the bins,
//! not the cells times the bootstrap classes (docs/capacity.md#cost): the sums of any run
//! of cells are two rows apart.

use super::cells::{Cells, cell, class};
use super::fit::MAX_CLASSES;

/// Sums over a run of cells, every count decayed to the estimate's instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// Σ rate × requests.
    pub rate: f64,
    pub total: f64,
    pub good: f64,
    pub class_total: [f64; MAX_CLASSES],
    pub class_good: [f64; MAX_CLASSES],
}

impl Default for Row {
    fn default() -> Row {
        Row { rate: 0.0, total: 0.0, good: 0.0, class_total: [0.0; MAX_CLASSES], class_good: [0.0; MAX_CLASSES] }
    }
}

impl Row {
    /// Adds `o − minus` to `self`.
    pub fn add_difference(&mut self, o: &Row, minus: &Row) {
        self.rate += o.rate - minus.rate;
        self.total += o.total - minus.total;
        self.good += o.good - minus.good;
        for c in 0..MAX_CLASSES {
            self.class_total[c] += o.class_total[c] - minus.class_total[c];
            self.class_good[c] += o.class_good[c] - minus.class_good[c];
        }
    }

    pub fn add(&mut self, o: &Row) {
        self.add_difference(o, &Row::default());
    }
}

/// Running sums of one table: `rows[i]` sums the first `i` distinct cells of `cells`.
#[derive(Debug, Clone, Default)]
pub struct Prefix {
    pub cells: Vec<i32>,
    rows: Vec<Row>,
}

impl Prefix {
    /// The running sums of `c`, every count multiplied by `scale`.
    pub fn build(&mut self, c: &Cells, scale: f64) {
        self.cells.clear();
        self.rows.clear();
        self.rows.push(Row::default());
        let mut acc = Row::default();
        for (key, s) in c.iter() {
            let at = cell(*key);
            if self.cells.last() != Some(&at) {
                if !self.cells.is_empty() {
                    self.rows.push(acc);
                }
                self.cells.push(at);
            }
            let k = class(*key).min(MAX_CLASSES - 1);
            acc.rate += s.rate_total * scale;
            acc.total += s.total * scale;
            acc.good += s.good * scale;
            acc.class_total[k] += s.total * scale;
            acc.class_good[k] += s.good * scale;
        }
        if !self.cells.is_empty() {
            self.rows.push(acc);
        }
    }

    /// Adds the sums of the cells from the `i`-th distinct one up to `hi` (exclusive) to
    /// `into`, and returns the index of the first cell at or above `hi`: a walk up the
    /// cells in ascending ranges needs no search.
    pub fn add_from(&self, i: usize, hi: i64, into: &mut Row) -> usize {
        let mut j = i;
        while self.cells.get(j).is_some_and(|&c| (c as i64) < hi) {
            j += 1;
        }
        if j > i {
            into.add_difference(&self.rows[j], &self.rows[i]);
        }
        j
    }
}
