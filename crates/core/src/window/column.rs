//! The value column of one stored scrape: raw `f64`s (a keyframe) or, for the scrapes in
//! between, per-series deltas from the previous scrape as zigzag varints.
//!
//! Counters and bucket counts are integers in practice and move by little per scrape,
//! so most series cost one byte instead of eight. Any value that is not an exactly
//! representable integer (a gauge like KV usage, NaN, −0, beyond 2^53) is stored raw
//! inline, so decoding is always bit-exact.
//!
//! The bytes are shared (`Arc`): cloning a target's store to evaluate it outside its lock
//! copies no values.

use std::sync::Arc;

/// Largest magnitude stored as an integer delta: every integer up to it is exact in f64.
const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53

#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    Raw(Arc<[f64]>),
    Delta(Arc<[u8]>),
}

fn integral(v: f64) -> bool {
    v.fract() == 0.0 && v.abs() <= EXACT && v.to_bits() != (-0.0f64).to_bits()
}

fn put_varint(out: &mut Vec<u8>, mut u: u64) {
    while u >= 0x80 {
        out.push((u as u8) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut u = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        u |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(u);
        }
    }
    None
}

impl Column {
    /// Encodes `values` against `prev` (same layout, same length), or raw without one.
    pub fn encode(values: &[f64], prev: Option<&[f64]>) -> Column {
        let Some(prev) = prev.filter(|p| p.len() == values.len()) else {
            return Column::Raw(values.into());
        };
        let mut out = Vec::with_capacity(values.len() + 8);
        for (&v, &p) in values.iter().zip(prev) {
            if integral(v) && integral(p) {
                let d = v as i64 - p as i64; // both within ±2^53: no overflow
                let zigzag = ((d << 1) ^ (d >> 63)) as u64;
                put_varint(&mut out, zigzag << 1);
            } else {
                put_varint(&mut out, 1);
                out.extend_from_slice(&v.to_bits().to_le_bytes());
            }
        }
        Column::Delta(out.into())
    }

    /// Writes the values into `cur`, which holds the previous scrape's values for a
    /// delta column. Returns `false` if the column is corrupt (it never is when built by
    /// [`Column::encode`]).
    pub fn decode_into(&self, cur: &mut Vec<f64>) -> bool {
        match self {
            Column::Raw(v) => {
                cur.clear();
                cur.extend_from_slice(v);
                true
            }
            Column::Delta(bytes) => {
                let mut pos = 0;
                for slot in cur.iter_mut() {
                    let Some(u) = get_varint(bytes, &mut pos) else { return false };
                    if u & 1 == 1 {
                        let Some(raw) = bytes.get(pos..pos + 8) else { return false };
                        let mut b = [0u8; 8];
                        b.copy_from_slice(raw);
                        *slot = f64::from_bits(u64::from_le_bytes(b));
                        pos += 8;
                    } else {
                        let z = u >> 1;
                        let d = ((z >> 1) as i64) ^ -((z & 1) as i64);
                        *slot = (*slot as i64 + d) as f64;
                    }
                }
                pos == bytes.len()
            }
        }
    }

    pub fn is_raw(&self) -> bool {
        matches!(self, Column::Raw(_))
    }

    pub fn heap_bytes(&self) -> usize {
        match self {
            Column::Raw(v) => v.len() * std::mem::size_of::<f64>(),
            Column::Delta(b) => b.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_bit_exactly() {
        let rows: [&[f64]; 4] = [
            &[0.0, 10.0, 0.8, f64::NAN, 1e300, 5.0, 9e15],
            &[3.0, 2.0, 0.81, 1.0, 1e300, -0.0, 9_007_199_254_740_992.0],
            &[3.0, 700_000.0, f64::INFINITY, f64::NAN, 7.0, 4.0, -9_007_199_254_740_992.0],
            &[-1.0, 700_001.0, 0.5, 2.0, 7.5, 4.0, 1.0],
        ];
        let mut prev: Option<Vec<f64>> = None;
        let mut cur = Vec::new();
        for row in rows {
            let c = Column::encode(row, prev.as_deref());
            assert_eq!(c.is_raw(), prev.is_none());
            assert!(c.decode_into(&mut cur));
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&cur), bits(row));
            prev = Some(row.to_vec());
        }
    }

    #[test]
    fn small_integer_steps_cost_one_byte() {
        let prev: Vec<f64> = (0..90).map(|i| 1000.0 * i as f64).collect();
        let next: Vec<f64> = prev.iter().map(|v| v + 3.0).collect();
        assert_eq!(Column::encode(&next, Some(&prev)).heap_bytes(), 90);
    }

    #[test]
    fn corrupt_columns_are_refused() {
        let mut cur = vec![1.0, 2.0];
        assert!(!Column::Delta(Arc::from([0x80u8])).decode_into(&mut cur));
        assert!(!Column::Delta(Arc::from([1u8, 0, 0])).decode_into(&mut cur));
        assert!(!Column::Delta(Arc::from([0u8, 0, 0])).decode_into(&mut cur), "trailing bytes");
    }
}
