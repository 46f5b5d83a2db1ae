//! A ring of fixed-width rows of counts, one row per time bucket of an SLO period, with the
//! totals of the rows inside the period kept up to date, so that reading the period costs
//! nothing however long it is.
//!
//! Rows are `f32`: a count stays exact up to 2^24 per bucket (16.7 million requests in five
//! minutes on one target), and halving the row is what keeps a 30-day period of a
//! three-clause SLO under half a mebibyte. The totals are `f64`: every `f32` is exact in
//! an `f64`, so adding a row when it is written and subtracting the same row when it
//! leaves the period cancels exactly for counts, and to an `f64` rounding for fractions.

/// Rows of `width` counts in `len` buckets of `bucket_ms`; the newest bucket is `now`'s.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Ledger {
    width: usize,
    len: usize,
    bucket_ms: i64,
    /// `len × width` counts, allocated on the first write.
    cells: Vec<f32>,
    /// Absolute bucket number (`t_ms / bucket_ms`) of the newest bucket; `None` before the
    /// first write.
    newest: Option<i64>,
    totals: Vec<f64>,
    /// When the first counts arrived, Unix ms: how much of the period has data.
    first_ms: Option<i64>,
}

impl Ledger {
    pub fn new(width: usize, len: usize, bucket_ms: i64) -> Ledger {
        assert!(width > 0 && len > 0 && bucket_ms > 0, "a ledger needs rows, buckets and a bucket length");
        Ledger { width, len, bucket_ms, cells: Vec::new(), newest: None, totals: vec![0.0; width], first_ms: None }
    }

    fn bucket_of(&self, t_ms: i64) -> i64 {
        t_ms.div_euclid(self.bucket_ms)
    }

    /// Adds `row` (`width` counts) to the bucket of `t_ms`. Counts older than the period
    /// seen from the newest bucket are dropped: they are already outside it.
    pub fn add(&mut self, t_ms: i64, row: &[f64]) {
        debug_assert_eq!(row.len(), self.width);
        let b = self.bucket_of(t_ms);
        self.advance_to(b);
        let newest = self.newest.unwrap_or(b);
        if b <= newest - self.len as i64 {
            return;
        }
        if self.cells.is_empty() {
            self.cells = vec![0.0; self.len * self.width];
        }
        let slot = b.rem_euclid(self.len as i64) as usize * self.width;
        for (i, v) in row.iter().enumerate() {
            let before = self.cells[slot + i];
            let after = (f64::from(before) + v) as f32;
            self.cells[slot + i] = after;
            // What the cell gained as stored, so that subtracting the cell later cancels it.
            self.totals[i] += f64::from(after) - f64::from(before);
        }
        self.first_ms = Some(self.first_ms.map_or(t_ms, |f| f.min(t_ms)));
    }

    /// Moves the newest bucket up to `now_ms`'s, clearing the buckets that leave the period.
    pub fn advance(&mut self, now_ms: i64) {
        let b = self.bucket_of(now_ms);
        self.advance_to(b);
    }

    fn advance_to(&mut self, b: i64) {
        let Some(newest) = self.newest else {
            self.newest = Some(b);
            return;
        };
        if b <= newest {
            return;
        }
        if !self.cells.is_empty() {
            // Buckets newest+1 ..= b take over slots that held buckets a period older.
            let steps = (b - newest).min(self.len as i64);
            for k in 1..=steps {
                let slot = (newest + k).rem_euclid(self.len as i64) as usize * self.width;
                for i in 0..self.width {
                    self.totals[i] -= f64::from(self.cells[slot + i]);
                    self.cells[slot + i] = 0.0;
                }
            }
            if steps == self.len as i64 {
                // Everything left: start again from exact zeros.
                self.totals.iter_mut().for_each(|t| *t = 0.0);
            }
        }
        self.newest = Some(b);
    }

    /// The sum of every row in the period ending with the newest bucket.
    pub fn totals(&self) -> &[f64] {
        &self.totals
    }

    /// The time the first counts arrived, Unix ms.
    pub fn first_ms(&self) -> Option<i64> {
        self.first_ms
    }

    /// The start of the first counts' bucket, Unix ms: the period counts as covered from
    /// there, because that whole bucket leaves the ring one period after its start. Measured
    /// from the first count itself, coverage would still be below 1 when the first bucket
    /// leaves, and a filling period would lose counts.
    pub fn covered_since_ms(&self) -> Option<i64> {
        self.first_ms.map(|f| self.bucket_of(f) * self.bucket_ms)
    }

    /// Whether this ledger, read back from a snapshot, has the shape `Ledger::new(width,
    /// len, bucket_ms)` gives and consistent cells.
    pub fn has_shape(&self, width: usize, len: usize, bucket_ms: i64) -> bool {
        (self.width, self.len, self.bucket_ms) == (width, len, bucket_ms)
            && (self.cells.is_empty() || self.cells.len() == len * width)
            && self.totals.len() == width
    }

    /// Bytes on the heap once written (what docs/metrics.md#error-budget-over-a-period bounds).
    pub fn heap_bytes(&self) -> usize {
        self.len * self.width * std::mem::size_of::<f32>() + self.width * std::mem::size_of::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN5: i64 = 300_000;

    #[test]
    fn a_period_is_covered_exactly_when_its_first_bucket_leaves() {
        // Four buckets of 1 s: a period of 4 s. The first count lands mid-bucket.
        let mut l = Ledger::new(1, 4, 1000);
        l.add(1500, &[1.0]);
        assert_eq!(l.first_ms(), Some(1500));
        assert_eq!(l.covered_since_ms(), Some(1000));
        l.advance(4999);
        assert_eq!(l.totals(), &[1.0], "a whole period has not passed since the bucket began");
        l.advance(5000);
        assert_eq!(l.totals(), &[0.0], "the bucket leaves one period after its start, when coverage reaches 1");
    }

    #[test]
    fn totals_cover_the_last_len_buckets_only() {
        let mut l = Ledger::new(2, 4, MIN5);
        for b in 0..10i64 {
            l.add(b * MIN5 + 1_000, &[1.0, b as f64]);
            // Buckets b-3 ..= b are in: 4 rows (fewer at the start).
            let n = (b + 1).min(4) as f64;
            assert_eq!(l.totals()[0], n, "bucket {b}");
            assert_eq!(l.totals()[1], ((b - 3).max(0)..=b).map(|x| x as f64).sum::<f64>(), "bucket {b}");
        }
        // A row from before the period is dropped; one inside it is added to its bucket.
        l.add(5 * MIN5, &[100.0, 0.0]);
        assert_eq!(l.totals()[0], 4.0);
        l.add(7 * MIN5, &[100.0, 0.0]);
        assert_eq!(l.totals()[0], 104.0);
        // Time passing alone empties the period; a jump past it clears every bucket.
        // Buckets 6 and 7 (1 and 101) leave; 8 and 9 stay.
        l.advance(11 * MIN5);
        assert_eq!(l.totals()[0], 2.0);
        l.advance(100 * MIN5);
        assert_eq!(l.totals(), [0.0, 0.0]);
        assert_eq!(l.first_ms(), Some(1_000));
    }

    #[test]
    fn fractions_cancel_when_they_leave() {
        let mut l = Ledger::new(1, 3, MIN5);
        for b in 0..1000i64 {
            l.add(b * MIN5, &[1.0 / 3.0 + b as f64 * 1e-3]);
        }
        let exact: f64 = (997..1000).map(|b| f64::from((1.0 / 3.0 + b as f64 * 1e-3) as f32)).sum();
        assert!((l.totals()[0] - exact).abs() < 1e-9, "{} vs {exact}", l.totals()[0]);
    }
}
