//! The value column of one stored scrape: raw `f64`s (a keyframe) or, for the scrapes in
//! between, a packed difference from the previous scrape (docs/memory.md).
//!
//! Counters and bucket counts are integers in practice and move by little per scrape.
//! A series whose value and previous value are both exactly representable integers
//! stores its change `d` not as itself but as `d` minus the change of the integer series
//! in the column before it. Adjacent columns are a histogram's cumulative buckets in
//! ascending `le` (`window/layout.rs`), so that second difference is the number of
//! observations that landed in that one bucket: mostly 0 at a few seconds per scrape,
//! and 0 for every series that did not move. Runs of zeros are one token; a nonzero
//! residual is one zigzag varint, 1 byte from −32 to 31.
//!
//! Any other value (a fractional gauge or `_sum`, NaN, −0, ±inf, beyond 2^53) is stored
//! as the XOR of its bits with the previous value's, minus the XOR's zero bytes at its
//! high or its low end: an unchanged gauge costs 1 byte, a slowly moving `_sum` 6–7.
//! Decoding is therefore bit-exact for any `f64`. A column whose tokens do not cover
//! exactly its series, or that ends inside a token, is refused (`decode_into` returns
//! `false`); no input makes it panic.
//!
//! ```text
//! token: varint t = n << width | tag (a prefix code: the commonest kinds keep most bits)
//!   INT   tag  0  one integer series, residual = unzigzag(n): 1 byte from −32 to 31
//!   RUN   tag 01  n + 1 integer series, each with the residual 0: 1 byte up to 32
//!   LOW   tag 011 one XORed series; n (≤ 8) bytes follow, the XOR's low bytes, little-endian
//!   HIGH  tag 111 one XORed series; n (≤ 8) bytes follow, the XOR's high bytes, little-endian
//! ```
//!
//! The bytes are shared (`Arc`): cloning a target's store to evaluate it outside its lock
//! copies no values.

use std::sync::Arc;

/// Largest magnitude stored as an integer delta: every integer up to it is exact in f64.
const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53

/// A token kind: its tag and the tag's width in bits.
type Kind = (u64, u32);
const INT: Kind = (0b0, 1);
const RUN: Kind = (0b01, 2);
const LOW: Kind = (0b011, 3);
const HIGH: Kind = (0b111, 3);

fn token((tag, width): Kind, n: u64) -> u64 {
    (n << width) | tag
}

#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// A keyframe: the values themselves.
    Raw(Arc<[f64]>),
    /// Tokens against the previous scrape's values, as the module doc lays them out.
    Delta(Arc<[u8]>),
}

fn integral(v: f64) -> bool {
    whole(v) && v.to_bits() != (-0.0f64).to_bits()
}

/// Whether `v` is a whole number within ±2^53. Not `v.fract() == 0.0`: without SSE4.1 in
/// the target's baseline, `fract` is a call into libm, and this test runs for every value
/// of every scrape stored or saved. Within ±2^53 the conversion to `i64` truncates
/// exactly, so the round trip gives `v` back only if it is whole; NaN fails the bound.
#[inline]
pub(super) fn whole(v: f64) -> bool {
    v.abs() <= EXACT && (v as i64) as f64 == v
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut u: u64) {
    while u >= 0x80 {
        out.push((u as u8) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

#[inline]
pub(super) fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    // Most tokens are one byte.
    let b = *bytes.get(*pos)?;
    *pos += 1;
    if b & 0x80 == 0 {
        return Some(u64::from(b));
    }
    let mut u = u64::from(b & 0x7f);
    for shift in (7..64).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        u |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(u);
        }
    }
    None
}

pub(super) fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

pub(super) fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// Ends a run of `run` zero residuals.
fn flush_run(out: &mut Vec<u8>, run: &mut u64) {
    if *run > 0 {
        put_varint(out, token(RUN, *run - 1));
        *run = 0;
    }
}

/// Appends to `out` the tokens of `values` against `prev` (same length): the bytes of a
/// [`Column::Delta`].
pub(super) fn pack(values: &[f64], prev: &[f64], out: &mut Vec<u8>) {
    // The change of the last integer series; 0 after an XORed one.
    let mut pred = 0i64;
    let mut run = 0u64;
    for (&v, &p) in values.iter().zip(prev) {
        if integral(v) && integral(p) {
            // Both within ±2^53, so neither the change nor the residual overflows.
            let d = v as i64 - p as i64;
            let residual = d - pred;
            pred = d;
            if residual == 0 {
                run += 1;
            } else {
                flush_run(out, &mut run);
                put_varint(out, token(INT, zigzag(residual)));
            }
            continue;
        }
        flush_run(out, &mut run);
        pred = 0;
        let x = (v.to_bits() ^ p.to_bits()).to_le_bytes();
        // A nearby value shares the sign, exponent and top of the mantissa (zero high
        // bytes); a short fraction like 0.5 has zero low bytes.
        let zero_high = x.iter().rev().take_while(|&&b| b == 0).count();
        let zero_low = x.iter().take_while(|&&b| b == 0).count();
        if zero_high >= zero_low {
            let n = 8 - zero_high;
            put_varint(out, token(LOW, n as u64));
            out.extend_from_slice(&x[..n]);
        } else {
            put_varint(out, token(HIGH, (8 - zero_low) as u64));
            out.extend_from_slice(&x[zero_low..]);
        }
    }
    flush_run(out, &mut run);
}

impl Column {
    /// Encodes `values` against `prev` (same layout, same length), or raw without one.
    pub fn encode(values: &[f64], prev: Option<&[f64]>) -> Column {
        let Some(prev) = prev.filter(|p| p.len() == values.len()) else {
            return Column::Raw(values.into());
        };
        let mut out = Vec::with_capacity(values.len() / 2 + 8);
        pack(values, prev, &mut out);
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
            Column::Delta(bytes) => decode_packed(bytes, cur),
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

/// Arithmetic wraps: a corrupt column decodes to garbage or is refused, never panics (a
/// snapshot's checksum catches the garbage). On a column built by [`Column::encode`] it
/// never wraps.
pub(super) fn decode_packed(bytes: &[u8], cur: &mut [f64]) -> bool {
    let (mut i, mut pos, mut pred) = (0usize, 0usize, 0i64);
    while i < cur.len() {
        let Some(t) = get_varint(bytes, &mut pos) else { return false };
        if t & 1 == 0 {
            pred = pred.wrapping_add(unzigzag(t >> 1));
            cur[i] = (cur[i] as i64).wrapping_add(pred) as f64;
            i += 1;
        } else if t & 2 == 0 {
            let n = t >> 2;
            if n >= (cur.len() - i) as u64 {
                return false;
            }
            let end = i + n as usize + 1;
            // A residual of 0 after a change of 0 leaves the value as it was.
            if pred != 0 {
                for slot in &mut cur[i..end] {
                    *slot = (*slot as i64).wrapping_add(pred) as f64;
                }
            }
            i = end;
        } else {
            let n = t >> 3;
            let Some(raw) = (n <= 8).then(|| bytes.get(pos..pos + n as usize)).flatten() else { return false };
            pos += raw.len();
            let mut x = [0u8; 8];
            if t & 4 == 0 {
                x[..raw.len()].copy_from_slice(raw);
            } else {
                x[8 - raw.len()..].copy_from_slice(raw);
            }
            cur[i] = f64::from_bits(cur[i].to_bits() ^ u64::from_le_bytes(x));
            pred = 0;
            i += 1;
        }
    }
    pos == bytes.len()
}

/// The values of a keyframe, packed against zeros: an integer series costs its difference
/// from the integer series before it (a histogram's cumulative buckets: the count of one
/// bucket), a float its bytes that are not zero. A raw keyframe's 8 bytes a series are most
/// of what a segment or thin block costs beside its differences; packed, a vLLM rank's
/// keyframe takes ≈ 2–4 bytes a series. Bit-exact like every column.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Frame {
    len: usize,
    bytes: Box<[u8]>,
}

impl Frame {
    pub(super) fn new(values: &[f64]) -> Frame {
        let mut bytes = Vec::with_capacity(values.len() * 4);
        pack(values, &vec![0.0; values.len()], &mut bytes);
        Frame { len: values.len(), bytes: bytes.into_boxed_slice() }
    }

    /// Series held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Writes the values into `out`, resized to them. `false` if the bytes do not decode
    /// (never ones [`Frame::new`] packed).
    pub(super) fn decode_into(&self, out: &mut Vec<f64>) -> bool {
        out.clear();
        out.resize(self.len, 0.0);
        decode_packed(&self.bytes, out)
    }

    /// The values, decoded; `None` where they do not decode.
    pub(super) fn values(&self) -> Option<Vec<f64>> {
        let mut out = Vec::new();
        self.decode_into(&mut out).then_some(out)
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.bytes.len()
    }
}

/// Decodes a delta column of the first snapshot format (`window::saved`): per series a
/// zigzag varint of its change shifted left by one, or the flag 1 and 8 raw bytes.
/// `false` if corrupt.
pub fn decode_first_format(bytes: &[u8], cur: &mut [f64]) -> bool {
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
            *slot = (*slot as i64).wrapping_add(unzigzag(u >> 1)) as f64;
        }
    }
    pos == bytes.len()
}

#[cfg(test)]
/// The first snapshot format's encoder, kept here to check its decoder and to compare.
pub(super) fn encode_first_format(values: &[f64], prev: &[f64]) -> Vec<u8> {
    let mut out = Vec::new();
    for (&v, &p) in values.iter().zip(prev) {
        if integral(v) && integral(p) {
            put_varint(&mut out, zigzag(v as i64 - p as i64) << 1);
        } else {
            put_varint(&mut out, 1);
            out.extend_from_slice(&v.to_bits().to_le_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn bits(v: &[f64]) -> Vec<u64> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// `values` through a delta column against `prev`, decoded again.
    fn round_trip(values: &[f64], prev: &[f64]) -> Vec<f64> {
        let c = Column::encode(values, Some(prev));
        assert!(!c.is_raw());
        let mut cur = prev.to_vec();
        assert!(c.decode_into(&mut cur), "a column built by encode decodes");
        cur
    }

    /// A keyframe packed against zeros gives its values back bit for bit, and costs less
    /// than raw `f64`s where they are counts.
    #[test]
    fn a_packed_keyframe_round_trips_and_costs_less_than_raw_counts() {
        let odd = [f64::NAN, -0.0, f64::INFINITY, 1e300, 0.1, -9_007_199_254_740_992.0, 1.7e9];
        let counts: Vec<f64> = (0..140).map(|i| f64::from(i * i * 37)).chain(odd).collect();
        let frame = Frame::new(&counts);
        assert_eq!(bits(&frame.values().unwrap()), bits(&counts));
        assert_eq!(frame.len(), counts.len());
        assert!(frame.heap_bytes() * 2 < counts.len() * 8, "{} bytes", frame.heap_bytes());
        let mut cut = frame.clone();
        cut.bytes = cut.bytes[..cut.bytes.len() - 1].into();
        assert!(cut.values().is_none(), "cut bytes are refused");
    }

    #[test]
    fn round_trips_bit_exactly() {
        let rows: [&[f64]; 5] = [
            &[0.0, 10.0, 0.8, f64::NAN, 1e300, 5.0, 9e15, 0.0],
            &[3.0, 2.0, 0.81, 1.0, 1e300, -0.0, 9_007_199_254_740_992.0, 0.5],
            &[3.0, 700_000.0, f64::INFINITY, f64::NAN, 7.0, 4.0, -9_007_199_254_740_992.0, 0.5],
            &[-1.0, 700_001.0, 0.5, 2.0, 7.5, 4.0, 1.0, f64::from_bits(0x7ff8_0000_dead_beef)],
            &[-1.0, 700_001.0, 0.5, 2.0, 7.5, 4.0, 1.0, f64::NEG_INFINITY],
        ];
        let mut prev: Option<Vec<f64>> = None;
        let mut cur = Vec::new();
        for row in rows {
            let c = Column::encode(row, prev.as_deref());
            assert_eq!(c.is_raw(), prev.is_none());
            assert!(c.decode_into(&mut cur));
            assert_eq!(bits(&cur), bits(row));
            let mut legacy = prev.clone().unwrap_or_default();
            if let Some(p) = &prev {
                assert!(decode_first_format(&encode_first_format(row, p), &mut legacy));
                assert_eq!(bits(&legacy), bits(row), "first format");
            }
            prev = Some(row.to_vec());
        }
    }

    #[test]
    fn whole_numbers_are_told_without_libm() {
        const EXACT: f64 = 9_007_199_254_740_992.0;
        for v in [0.0, -0.0, 1.0, -1.0, 42.0, 1e15, EXACT, -EXACT, EXACT - 1.0] {
            assert!(whole(v), "{v} is whole");
        }
        let beyond = [EXACT * 2.0, -EXACT * 2.0, 1e300, f64::MAX, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];
        for v in [0.5, -0.5, 1e-300, 4503599627370495.5, f64::MIN_POSITIVE].into_iter().chain(beyond) {
            assert!(!whole(v), "{v} is not whole within 2^53");
        }
        assert!(!integral(-0.0), "a column stores -0 by its bits");
        // The `fract` test the column used before gives the same answers.
        let old = |v: f64| v.fract() == 0.0 && v.abs() <= EXACT;
        for i in -2000..2000 {
            let v = f64::from(i) * 0.25;
            assert_eq!(whole(v), old(v), "{v}");
        }
    }

    #[test]
    fn unchanged_and_evenly_moving_series_cost_one_token() {
        let prev: Vec<f64> = (0..90).map(|i| 1000.0 * i as f64).collect();
        // A varint of 7 bits holds a run of up to 32.
        assert_eq!(Column::encode(&prev, Some(&prev)).heap_bytes(), 2, "one run of 90");
        assert_eq!(Column::encode(&prev[..32], Some(&prev[..32])).heap_bytes(), 1, "one run of 32");
        let next: Vec<f64> = prev.iter().map(|v| v + 3.0).collect();
        assert_eq!(Column::encode(&next, Some(&prev)).heap_bytes(), 3, "3, then 89 times 3 again");
        let gauges = [0.8, f64::NAN, 1e300];
        assert_eq!(Column::encode(&gauges, Some(&gauges)).heap_bytes(), 3, "an unchanged XOR is one byte");
    }

    /// The columns of a vLLM rank's scrapes 5 s apart, `mean` requests each: four latency
    /// histograms of 20–23 buckets and two length histograms of 15, each with `_sum`
    /// (seconds or tokens) and `_count`; token and finish counters; KV usage and running
    /// requests.
    fn vllm_rank_at_5s(scrapes: usize, mean: u64) -> Vec<Vec<f64>> {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut draw = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let shapes = [23usize, 20, 20, 22, 15, 15];
        let mut buckets: Vec<Vec<f64>> = shapes.iter().map(|&n| vec![0.0; n]).collect();
        let mut sums = [0.0f64; 6];
        let (mut prompt, mut generated, mut finished) = (0.0, 0.0, 0.0);
        (0..scrapes)
            .map(|_| {
                let requests = draw() % (2 * mean + 1);
                for _ in 0..requests {
                    for (h, b) in buckets.iter_mut().enumerate() {
                        // Around a mode, over 7 buckets; the others stay as they were.
                        let n = b.len() as u64;
                        let at = (n / 3 + draw() % 4 + draw() % 4) as usize;
                        b[at..].iter_mut().for_each(|c| *c += 1.0);
                        // Seconds for the latencies, whole tokens for the lengths.
                        sums[h] += if h < 4 { (draw() % 1000) as f64 / 997.0 } else { (draw() % 2000) as f64 };
                    }
                    prompt += (draw() % 2000) as f64;
                    generated += (draw() % 400) as f64;
                    finished += 1.0;
                }
                let mut col: Vec<f64> = buckets.iter().flatten().copied().collect();
                for (h, b) in buckets.iter().enumerate() {
                    col.extend([sums[h], b[b.len() - 1]]);
                }
                col.extend([prompt, generated, finished, 0.0, 0.0, 0.0]);
                col.extend([(draw() % 1000) as f64 / 1000.0, (draw() % 8) as f64]);
                col
            })
            .collect()
    }

    #[test]
    fn a_rank_under_load_costs_less_than_a_byte_per_series() {
        // Mean requests per scrape, bound on bytes per series, bound against the first format.
        for (mean, per_series, vs_first) in [(1, 0.55, 0.42), (5, 0.8, 0.6), (25, 1.0, 0.66)] {
            let scrapes = vllm_rank_at_5s(200, mean);
            let series = scrapes[0].len();
            let (mut packed, mut first) = (0, 0);
            for pair in scrapes.windows(2) {
                assert_eq!(bits(&round_trip(&pair[1], &pair[0])), bits(&pair[1]));
                packed += Column::encode(&pair[1], Some(&pair[0])).heap_bytes();
                first += encode_first_format(&pair[1], &pair[0]).len();
            }
            let (packed, first) = (packed as f64 / 199.0, first as f64 / 199.0);
            println!(
                "{mean} requests per scrape, {series} series: {packed:.1} B per scrape, first format {first:.1} B"
            );
            assert!(packed < per_series * series as f64, "{mean} requests: {packed:.1} B for {series} series");
            assert!(packed < vs_first * first, "{mean} requests: {packed:.1} B, first format {first:.1} B");
        }
    }

    #[test]
    fn corrupt_columns_are_refused() {
        let mut cur = vec![1.0, 2.0];
        let refused = |bytes: &[u8]| !Column::Delta(Arc::from(bytes)).decode_into(&mut cur.clone());
        assert!(refused(&[0x80]), "a varint cut short");
        let t = |kind, n| token(kind, n) as u8;
        assert!(refused(&[t(RUN, 0)]), "too few series");
        assert!(refused(&[t(RUN, 2)]), "a run past the last series");
        assert!(refused(&[t(LOW, 8), 0, 0]), "XOR bytes cut short");
        assert!(refused(&[t(HIGH, 9), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), "more than 8 XOR bytes");
        assert!(refused(&[t(RUN, 1), 0]), "trailing bytes");
        assert!(Column::Delta(Arc::from([t(RUN, 1)])).decode_into(&mut cur));
        assert!(Column::Delta(Arc::from([t(INT, 1), t(HIGH, 0)])).decode_into(&mut cur));
        assert!(!decode_first_format(&[0x80], &mut cur));
        assert!(!decode_first_format(&[1, 0, 0], &mut cur));
        assert!(!decode_first_format(&[0, 0, 0], &mut cur), "trailing bytes");
    }

    /// A value that is an exact integer, a fraction, beyond 2^53, or any bit pattern.
    fn value() -> impl Strategy<Value = f64> {
        prop_oneof![
            4 => (-1000i64..1_000_000).prop_map(|i| i as f64),
            1 => (-(1i64 << 53)..=(1i64 << 53)).prop_map(|i| i as f64),
            1 => -1e6f64..1e6,
            1 => prop::sample::select(vec![
                f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0, f64::MIN_POSITIVE,
                f64::MAX, f64::MIN, 9_007_199_254_740_993.0, -9_007_199_254_740_994.0, 0.5,
            ]),
            1 => any::<u64>().prop_map(f64::from_bits),
        ]
    }

    /// Two rows of one layout: the second equal to the first, moved a little, or unrelated,
    /// series by series.
    fn rows() -> impl Strategy<Value = (Vec<f64>, Vec<f64>)> {
        prop::collection::vec((value(), value(), 0u8..4, -40i64..40), 0..200).prop_map(|cols| {
            cols.into_iter()
                .map(|(p, other, how, step)| match how {
                    0 => (p, p),
                    1 => (p, p + step as f64),
                    2 => (p.trunc(), p.trunc() + step as f64),
                    _ => (p, other),
                })
                .unzip()
        })
    }

    proptest! {
        #[test]
        fn any_two_rows_round_trip_bit_exactly((prev, next) in rows()) {
            prop_assert_eq!(bits(&round_trip(&next, &prev)), bits(&next));
            let mut legacy = prev.clone();
            prop_assert!(decode_first_format(&encode_first_format(&next, &prev), &mut legacy));
            prop_assert_eq!(bits(&legacy), bits(&next));
        }

        #[test]
        fn any_bytes_decode_or_are_refused_without_a_panic(
            bytes in prop::collection::vec(any::<u8>(), 0..64),
            cur in prop::collection::vec(value(), 0..32),
        ) {
            let mut a = cur.clone();
            let _ = Column::Delta(bytes.as_slice().into()).decode_into(&mut a);
            let mut b = cur;
            let _ = decode_first_format(&bytes, &mut b);
        }
    }
}
