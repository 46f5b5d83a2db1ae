//! A ring of fixed-width rows of counts, one row per time bucket of an SLO period, with the
//! totals of the rows inside the period kept up to date, so that reading the period costs
//! nothing however long it is.
//!
//! Rows are `f32`: a count stays exact up to 2^24 per bucket (16.7 million requests in an
//! hour on one target, 4,660 a second), and halving the row is what keeps a full 28-day
//! period of a three-clause SLO under 40 KiB. The totals are `f64`: every `f32` is exact in
//! an `f64`, so adding a row when it is written and subtracting the same row when it
//! leaves the period cancels exactly for counts, and to an `f64` rounding for fractions.

/// Rows per chunk of the ring: a day of hourly buckets. A chunk is allocated when a bucket
/// in it is first written, so a ledger holds what the period has seen so far, not the whole
/// period from its first count.
const CHUNK: usize = 24;

/// Rows of `width` counts in `len` buckets of `bucket_ms`; the newest bucket is `now`'s.
/// A snapshot holds it as one flat row array ([`Flat`]), as it did before the chunks.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(from = "Flat", into = "Flat")]
pub struct Ledger {
    width: usize,
    len: usize,
    bucket_ms: i64,
    /// The ring's slots in chunks of [`CHUNK`] rows of `width` counts; `None` until written.
    chunks: Vec<Option<Box<[f32]>>>,
    /// Absolute bucket number (`t_ms / bucket_ms`) of the newest bucket; `None` before the
    /// first write.
    newest: Option<i64>,
    totals: Vec<f64>,
    /// When the first counts arrived, Unix ms: how much of the period has data.
    first_ms: Option<i64>,
}

/// A ledger as snapshots hold it: every slot's row in one array (empty before the first
/// write), the layout of the snapshot format.
#[derive(serde::Serialize, serde::Deserialize)]
struct Flat {
    width: usize,
    len: usize,
    bucket_ms: i64,
    cells: Vec<f32>,
    newest: Option<i64>,
    totals: Vec<f64>,
    first_ms: Option<i64>,
}

impl From<Ledger> for Flat {
    fn from(l: Ledger) -> Flat {
        let cells = if l.chunks.iter().all(Option::is_none) {
            Vec::new()
        } else {
            let mut cells = vec![0.0; l.len * l.width];
            for (k, c) in l.chunks.iter().enumerate() {
                if let Some(c) = c {
                    let at = k * CHUNK * l.width;
                    cells[at..at + c.len()].copy_from_slice(c);
                }
            }
            cells
        };
        Flat {
            width: l.width,
            len: l.len,
            bucket_ms: l.bucket_ms,
            cells,
            newest: l.newest,
            totals: l.totals,
            first_ms: l.first_ms,
        }
    }
}

impl From<Flat> for Ledger {
    /// Chunks that hold only zeros stay unallocated. Cells of another length than `len ×
    /// width` leave no chunks at all, which [`Ledger::has_shape`] refuses.
    fn from(f: Flat) -> Ledger {
        // A period's length comes from the config; one past a century of minutes is not a
        // ledger this daemon wrote, and gets no chunks rather than a huge empty ring.
        let chunks = if f.cells.is_empty() && f.len <= 1 << 26 {
            vec![None; f.len.div_ceil(CHUNK)]
        } else if f.width > 0 && f.len.checked_mul(f.width) == Some(f.cells.len()) {
            f.cells
                .chunks(CHUNK * f.width)
                .map(|c| c.iter().any(|v| *v != 0.0).then(|| Box::<[f32]>::from(c)))
                .collect()
        } else {
            Vec::new()
        };
        Ledger {
            width: f.width,
            len: f.len,
            bucket_ms: f.bucket_ms,
            chunks,
            newest: f.newest,
            totals: f.totals,
            first_ms: f.first_ms,
        }
    }
}

impl Ledger {
    pub fn new(width: usize, len: usize, bucket_ms: i64) -> Ledger {
        assert!(width > 0 && len > 0 && bucket_ms > 0, "a ledger needs rows, buckets and a bucket length");
        Ledger {
            width,
            len,
            bucket_ms,
            chunks: vec![None; len.div_ceil(CHUNK)],
            newest: None,
            totals: vec![0.0; width],
            first_ms: None,
        }
    }

    fn bucket_of(&self, t_ms: i64) -> i64 {
        t_ms.div_euclid(self.bucket_ms)
    }

    /// Counts in chunk `k` once allocated: [`CHUNK`] rows, fewer in the last chunk.
    fn chunk_cells(&self, k: usize) -> usize {
        (self.len - k * CHUNK).min(CHUNK) * self.width
    }

    /// The ring slot of absolute bucket `b`: its chunk, and its row's offset in the chunk.
    fn slot(&self, b: i64) -> (usize, usize) {
        let slot = b.rem_euclid(self.len as i64) as usize;
        (slot / CHUNK, slot % CHUNK * self.width)
    }

    /// Adds `row` (`width` counts) to the bucket of `t_ms`. Counts older than the period
    /// seen from the newest bucket are dropped: they are already outside it. Returns the
    /// rows written and cleared (the work it took, which depends on the buckets time
    /// crossed, not on the period's length).
    pub fn add(&mut self, t_ms: i64, row: &[f64]) -> u64 {
        debug_assert_eq!(row.len(), self.width);
        let b = self.bucket_of(t_ms);
        let cleared = self.advance_to(b);
        let newest = self.newest.unwrap_or(b);
        if b <= newest - self.len as i64 {
            return cleared;
        }
        let (k, at) = self.slot(b);
        let cells = self.chunk_cells(k);
        let chunk = self.chunks[k].get_or_insert_with(|| vec![0.0; cells].into_boxed_slice());
        for (i, v) in row.iter().enumerate() {
            let before = chunk[at + i];
            let after = (f64::from(before) + v) as f32;
            chunk[at + i] = after;
            // What the cell gained as stored, so that subtracting the cell later cancels it.
            self.totals[i] += f64::from(after) - f64::from(before);
        }
        self.first_ms = Some(self.first_ms.map_or(t_ms, |f| f.min(t_ms)));
        cleared + 1
    }

    /// Moves the newest bucket up to `now_ms`'s, clearing the buckets that leave the period;
    /// returns the rows cleared.
    pub fn advance(&mut self, now_ms: i64) -> u64 {
        let b = self.bucket_of(now_ms);
        self.advance_to(b)
    }

    fn advance_to(&mut self, b: i64) -> u64 {
        let Some(newest) = self.newest else {
            self.newest = Some(b);
            return 0;
        };
        if b <= newest {
            return 0;
        }
        let mut cleared = 0;
        if self.chunks.iter().any(Option::is_some) {
            // Buckets newest+1 ..= b take over slots that held buckets a period older.
            let steps = (b - newest).min(self.len as i64);
            for step in 1..=steps {
                let (k, at) = self.slot(newest + step);
                let Some(chunk) = self.chunks[k].as_mut() else { continue };
                cleared += 1;
                for i in 0..self.width {
                    self.totals[i] -= f64::from(chunk[at + i]);
                    chunk[at + i] = 0.0;
                }
            }
            if steps == self.len as i64 {
                // Everything left: start again from exact zeros.
                self.totals.iter_mut().for_each(|t| *t = 0.0);
            }
        }
        self.newest = Some(b);
        cleared
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
            && self.chunks.len() == len.div_ceil(CHUNK)
            && self.chunks.iter().enumerate().all(|(k, c)| c.as_ref().is_none_or(|c| c.len() == self.chunk_cells(k)))
            && self.totals.len() == width
    }

    /// Bytes on the heap once the whole period is written (what
    /// docs/metrics.md#error-budget-over-a-period bounds); less while it fills.
    pub fn heap_bytes(&self) -> usize {
        self.len * self.width * std::mem::size_of::<f32>() + self.fixed_bytes()
    }

    /// Bytes on the heap now: the chunks written so far.
    pub fn allocated_bytes(&self) -> usize {
        let rows: usize = self.chunks.iter().flatten().map(|c| c.len()).sum();
        rows * std::mem::size_of::<f32>() + self.fixed_bytes()
    }

    /// The totals and the chunk table, allocated whole with the ledger.
    fn fixed_bytes(&self) -> usize {
        self.width * std::mem::size_of::<f64>() + self.chunks.len() * std::mem::size_of::<Option<Box<[f32]>>>()
    }

    /// This ledger read back from a snapshot, on the grid `Ledger::new(width, len,
    /// bucket_ms)` gives: as it is when the grid is the same, else each bucket's row moved
    /// to the new bucket that holds its start (exact when the new bucket length is a whole
    /// number of old ones, as the hour is of the five minutes that snapshots of earlier
    /// versions kept). `None` for another width or inconsistent cells.
    pub fn fit(self, width: usize, len: usize, bucket_ms: i64) -> Option<Ledger> {
        if self.width != width
            || self.len == 0
            || self.bucket_ms <= 0
            || !self.has_shape(width, self.len, self.bucket_ms)
        {
            return None;
        }
        if (self.len, self.bucket_ms) == (len, bucket_ms) {
            return Some(self);
        }
        let mut out = Ledger::new(width, len, bucket_ms);
        let Some(newest) = self.newest else { return Some(out) };
        out.newest = Some((newest * self.bucket_ms).div_euclid(bucket_ms));
        let mut row = vec![0.0; width];
        for b in (newest - self.len as i64 + 1)..=newest {
            let (k, at) = self.slot(b);
            let Some(chunk) = self.chunks[k].as_ref() else { continue };
            let cells = &chunk[at..at + width];
            if cells.iter().all(|v| *v == 0.0) {
                continue;
            }
            row.iter_mut().zip(cells).for_each(|(r, c)| *r = f64::from(*c));
            out.add(b * self.bucket_ms, &row);
        }
        out.first_ms = self.first_ms;
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN5: i64 = 300_000;
    const HOUR: i64 = 3_600_000;

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
    fn a_ledger_holds_the_days_it_has_seen_not_the_whole_period() {
        // 28 days of hourly buckets, three counts a row: 672 rows once full.
        let mut l = Ledger::new(3, 672, HOUR);
        let t0 = 1_700_000_000_000 / HOUR * HOUR;
        for b in 0..6 {
            l.add(t0 + b * HOUR, &[1.0, 0.5, 0.0]);
        }
        // Six hours fit one or two chunks of a day; the bound is for the whole period.
        let table = 28 * std::mem::size_of::<Option<Box<[f32]>>>();
        assert!(l.allocated_bytes() <= 2 * CHUNK * 3 * 4 + 3 * 8 + table, "{} bytes", l.allocated_bytes());
        assert!(l.heap_bytes() >= 8 * l.allocated_bytes());
        assert_eq!(l.totals(), &[6.0, 3.0, 0.0]);
        // A whole period later every chunk has been written, and what left the period is gone.
        for b in 6..672 + 10 {
            l.add(t0 + b * HOUR, &[1.0, 0.5, 0.0]);
        }
        assert_eq!(l.totals(), &[672.0, 336.0, 0.0]);
        assert_eq!(l.allocated_bytes(), l.heap_bytes());
    }

    #[test]
    fn five_minute_rows_read_back_into_hours_keep_every_count_in_the_period() {
        // A day of five-minute buckets, as snapshots of earlier versions hold a period, two
        // days of counts so that the ring has wrapped: one count per bucket, and the bucket's
        // number in the second column.
        let mut old = Ledger::new(2, 288, MIN5);
        let t0 = 1_700_000_000_000 / HOUR * HOUR;
        for b in 0..2 * 288 + 5 {
            old.add(t0 + b * MIN5 + 1_000, &[1.0, b as f64]);
        }
        let json = serde_json::to_value(&old).unwrap();
        let back: Ledger = serde_json::from_value(json).unwrap();
        let mut hourly = back.fit(2, 24, HOUR).expect("the same width");
        assert!(hourly.has_shape(2, 24, HOUR));
        // The five-minute ring holds buckets 293..=580. The hourly one holds hours 25..=48:
        // hour 48 has buckets 576..=580, the others twelve each from bucket 300; buckets
        // 293..=299 fall in hour 24, a period behind the newest hour, and go.
        let kept: Vec<i64> = (300..2 * 288 + 5).collect();
        assert_eq!(hourly.totals()[0], kept.len() as f64);
        assert_eq!(hourly.totals()[1], kept.iter().sum::<i64>() as f64);
        assert_eq!(hourly.first_ms(), old.first_ms());
        // And it slides by hours: the next hour takes the slot of the oldest.
        hourly.add(t0 + 49 * HOUR, &[1.0, 0.0]);
        assert_eq!(hourly.totals()[0], (kept.len() - 12 + 1) as f64);
        // The same grid reads back as it was; another width is refused.
        let same = old.clone().fit(2, 288, MIN5).unwrap();
        assert_eq!(same.totals(), old.totals());
        assert!(old.fit(3, 24, HOUR).is_none());
    }

    #[test]
    fn a_snapshot_holds_the_flat_rows_and_reads_back_the_same() {
        let mut l = Ledger::new(2, 600, MIN5);
        for b in [0i64, 1, 2, 300, 599] {
            l.add(b * MIN5 + 7, &[b as f64, 1.0]);
        }
        let json = serde_json::to_value(&l).unwrap();
        // The layout snapshots had before the chunks: every row in one array.
        assert_eq!(json["cells"].as_array().unwrap().len(), 600 * 2);
        assert_eq!(json["cells"][300 * 2].as_f64(), Some(300.0));
        let mut back: Ledger = serde_json::from_value(json).unwrap();
        assert!(back.has_shape(2, 600, MIN5));
        assert_eq!(back.totals(), l.totals());
        // Only the chunks with counts are allocated again (those of rows 0–2, 300 and 599).
        assert_eq!(back.allocated_bytes(), l.allocated_bytes());
        // And it goes on as the original does: bucket 600 takes bucket 0's slot.
        for x in [&mut l, &mut back] {
            x.add(600 * MIN5, &[0.0, 1.0]);
        }
        assert_eq!(back.totals(), l.totals());
        assert_eq!(back.totals(), &[902.0, 5.0]);
        // A ledger never written is an empty array; cells of the wrong length are refused.
        let empty: Ledger = serde_json::from_value(serde_json::to_value(Ledger::new(2, 600, MIN5)).unwrap()).unwrap();
        assert!(empty.has_shape(2, 600, MIN5) && empty.allocated_bytes() == empty.fixed_bytes());
        let mut bad = serde_json::to_value(&l).unwrap();
        bad["cells"] = serde_json::json!([1.0, 2.0, 3.0]);
        assert!(!serde_json::from_value::<Ledger>(bad).unwrap().has_shape(2, 600, MIN5));
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
