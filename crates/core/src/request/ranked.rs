//! A multiset of latencies whose nearest-rank quantiles are kept as cursors: each insert or
//! removal moves every cursor by a step or two, so reading a window's quantiles costs the
//! same however many requests the window holds (docs/architecture.md#exact-attainment-from-requests).
//!
//! A cursor sits on a value `at` and knows how many values lie strictly below it. The rank a
//! quantile asks for ([`nearest_rank`]) moves by at most one per insert or removal, and so
//! does the count below the cursor, so the cursor walks at most a step or two to the value
//! of that rank: a map lookup each. The cursor also keeps the count of its own value, so
//! that a change which leaves it in place costs no lookup at all.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::sketch::nearest_rank;

/// An `f64` as a key whose order is `f64::total_cmp`'s.
fn key(v: f64) -> u64 {
    let bits = v.to_bits();
    if bits >> 63 == 1 { !bits } else { bits | 1 << 63 }
}

fn value(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

#[derive(Debug, Clone, Copy)]
struct Cursor {
    quantile: f64,
    /// The value the cursor sits on (present in the map or not), `None` while empty.
    at: Option<u64>,
    /// Values strictly below `at`.
    below: u64,
    /// Values equal to `at`.
    here: u64,
}

#[derive(Debug, Clone)]
pub struct Ranked {
    counts: BTreeMap<u64, u32>,
    n: u64,
    cursors: Vec<Cursor>,
}

impl Ranked {
    pub fn new(quantiles: &[f64]) -> Ranked {
        let cursors = quantiles.iter().map(|&quantile| Cursor { quantile, at: None, below: 0, here: 0 }).collect();
        Ranked { counts: BTreeMap::new(), n: 0, cursors }
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    /// Adds `v`; returns the map steps taken (the work, for counting).
    pub fn insert(&mut self, v: f64) -> u64 {
        let k = key(v);
        *self.counts.entry(k).or_default() += 1;
        self.n += 1;
        for c in &mut self.cursors {
            match c.at {
                Some(at) if k < at => c.below += 1,
                Some(at) if k == at => c.here += 1,
                _ => {}
            }
        }
        1 + self.settle()
    }

    /// Removes one `v`, which must be held; returns the map steps taken.
    pub fn remove(&mut self, v: f64) -> u64 {
        let k = key(v);
        let Some(n) = self.counts.get_mut(&k) else {
            debug_assert!(false, "removing a value not held");
            return 1;
        };
        *n -= 1;
        if *n == 0 {
            self.counts.remove(&k);
        }
        self.n -= 1;
        for c in &mut self.cursors {
            match c.at {
                Some(at) if k < at => c.below -= 1,
                Some(at) if k == at => c.here -= 1,
                _ => {}
            }
        }
        1 + self.settle()
    }

    /// Moves each cursor to the value of its rank; returns the map steps taken.
    fn settle(&mut self) -> u64 {
        let mut steps = 0;
        for c in &mut self.cursors {
            if self.n == 0 {
                (c.at, c.below, c.here) = (None, 0, 0);
                continue;
            }
            let rank = nearest_rank(c.quantile, self.n);
            let mut at = match c.at {
                Some(at) => at,
                None => {
                    steps += 1;
                    let (&k, &n) = self.counts.iter().next().expect("not empty");
                    (c.below, c.here) = (0, u64::from(n));
                    k
                }
            };
            loop {
                if rank <= c.below {
                    let (&k, &n) = self.counts.range(..at).next_back().expect("values below the cursor");
                    at = k;
                    c.here = u64::from(n);
                    c.below -= c.here;
                } else if rank > c.below + c.here {
                    c.below += c.here;
                    let (&k, &n) = self
                        .counts
                        .range((Bound::Excluded(at), Bound::Unbounded))
                        .next()
                        .expect("values above the cursor");
                    at = k;
                    c.here = u64::from(n);
                } else {
                    break;
                }
                steps += 1;
            }
            c.at = Some(at);
        }
        steps
    }

    /// The smallest value held.
    pub fn min(&self) -> Option<f64> {
        self.counts.keys().next().map(|&k| value(k))
    }

    /// The largest value held.
    pub fn max(&self) -> Option<f64> {
        self.counts.keys().next_back().map(|&k| value(k))
    }

    /// The nearest-rank value of each quantile, in the order given; empty while no value is
    /// held.
    pub fn quantiles(&self) -> Vec<f64> {
        if self.n == 0 {
            return Vec::new();
        }
        self.cursors.iter().filter_map(|c| c.at.map(value)).collect()
    }

    /// Bytes held beyond the struct, estimated: a B-tree entry and its share of a node.
    pub fn heap_bytes(&self) -> usize {
        self.counts.len() * 24 + self.cursors.len() * std::mem::size_of::<Cursor>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_as_total_cmp() {
        let vs = [-3.5, -0.0, 0.0, 1e-300, 0.25, 7.0, f64::INFINITY];
        for w in vs.windows(2) {
            assert!(key(w[0]) < key(w[1]), "{w:?}");
        }
        for v in vs {
            assert_eq!(value(key(v)).to_bits(), v.to_bits());
        }
    }

    /// Against sorting after every change, over a sliding window of values with ties.
    #[test]
    fn cursors_give_the_nearest_rank_of_what_is_held() {
        let qs = [0.0, 0.5, 0.9, 0.99, 1.0];
        let mut r = Ranked::new(&qs);
        let mut held: std::collections::VecDeque<f64> = Default::default();
        let mut seed = 7u64;
        let mut steps = 0;
        for i in 0..3_000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = ((seed >> 33) % 200) as f64 / 8.0;
            steps += r.insert(v);
            held.push_back(v);
            // The window grows to 500, then slides; now and then it shrinks by a burst.
            let keep = if i % 700 == 699 { 50 } else { 500 };
            while held.len() > keep {
                steps += r.remove(held.pop_front().unwrap());
            }
            let mut sorted: Vec<f64> = held.iter().copied().collect();
            sorted.sort_by(f64::total_cmp);
            let want: Vec<f64> =
                qs.iter().map(|&q| sorted[nearest_rank(q, sorted.len() as u64) as usize - 1]).collect();
            assert_eq!(r.quantiles(), want, "after {i}");
            assert_eq!(r.len(), held.len() as u64);
        }
        // A few steps per change, not a walk over what is held (the bursts excepted).
        assert!(steps < 3_000 * 2 * (2 + 3 * qs.len() as u64), "{steps} steps");
        while let Some(v) = held.pop_front() {
            r.remove(v);
        }
        assert!(r.quantiles().is_empty() && r.counts.is_empty());
    }
}
