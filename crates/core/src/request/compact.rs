//! What the store keeps of one request: the numbers windows need, without the ITL vector
//! (folded into per-slot sketches at ingest), in 48 bytes (docs/limits.md#request-store).

use super::record::{RequestRecord, Status};

/// A request as the store keeps it. A missing latency is NaN, so that the record stays
/// small; [`Compact::ttft`] and [`Compact::tpot`] give it back as an `Option`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Compact {
    pub finished: f64,
    pub e2e: f64,
    ttft: f64,
    tpot: f64,
    pub output_tokens: u32,
    pub status: Status,
    flags: u8,
}

const OUTPUT_KNOWN: u8 = 1;
const OUTPUT_EXACT: u8 = 2;

/// Why a record was refused before it reached any window or counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Invalid {
    /// `finished_unix` or `e2e_s` is not a finite number ≥ 0, or a latency is negative or NaN.
    BadNumber,
}

impl Compact {
    /// The record's numbers, or why they cannot be used. Producers measure on a monotonic
    /// clock, so a negative or NaN duration is a producer bug, not a fast request.
    pub fn of(r: &RequestRecord) -> Result<Compact, Invalid> {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        let opt_ok = |v: Option<f64>| v.is_none_or(ok);
        if !r.finished_unix.is_finite() || !ok(r.e2e_s) || !opt_ok(r.ttft_s) || !opt_ok(r.tpot_s) {
            return Err(Invalid::BadNumber);
        }
        let mut flags = 0;
        if let Some(n) = r.output_tokens {
            flags |= OUTPUT_KNOWN;
            if n.exact {
                flags |= OUTPUT_EXACT;
            }
        }
        Ok(Compact {
            finished: r.finished_unix,
            e2e: r.e2e_s,
            ttft: r.ttft_s.unwrap_or(f64::NAN),
            tpot: r.tpot_s.unwrap_or(f64::NAN),
            output_tokens: r.output_tokens.map_or(0, |n| n.value),
            status: r.status,
            flags,
        })
    }

    pub fn ttft(&self) -> Option<f64> {
        (!self.ttft.is_nan()).then_some(self.ttft)
    }

    pub fn tpot(&self) -> Option<f64> {
        (!self.tpot.is_nan()).then_some(self.tpot)
    }

    pub fn ok(&self) -> bool {
        self.status.is_ok()
    }

    /// Whether the output token count is known exactly (from `usage` or per-event ids).
    pub fn tokens_exact(&self) -> bool {
        self.flags & OUTPUT_EXACT != 0
    }

    /// Whether the record carries an output token count at all.
    pub fn tokens_known(&self) -> bool {
        self.flags & OUTPUT_KNOWN != 0
    }

    /// Whether a TPOT value is exact: measured with an exact N. Without a TPOT it is moot.
    pub fn tpot_exact(&self) -> bool {
        self.tpot.is_nan() || self.tokens_exact()
    }

    /// When the source first saw this request: it finished `e2e` after it arrived.
    pub fn started(&self) -> f64 {
        self.finished - self.e2e
    }
}

/// Bytes one record takes in a snapshot ([`packed`]): four `f64`, the token count, the
/// status and flags, little-endian, no padding.
pub const PACKED_LEN: usize = 40;

impl Compact {
    /// Into `out`, [`PACKED_LEN`] bytes.
    fn pack(&self, out: &mut [u8]) {
        let (tag, code) = match self.status {
            Status::Ok => (0u8, 0u16),
            Status::HttpError(c) => (1, c),
            Status::StreamError => (2, 0),
            Status::ClientAbort => (3, 0),
            Status::UpstreamReset => (4, 0),
            Status::Truncated => (5, 0),
        };
        out[0..8].copy_from_slice(&self.finished.to_le_bytes());
        out[8..16].copy_from_slice(&self.e2e.to_le_bytes());
        out[16..24].copy_from_slice(&self.ttft.to_le_bytes());
        out[24..32].copy_from_slice(&self.tpot.to_le_bytes());
        out[32..36].copy_from_slice(&self.output_tokens.to_le_bytes());
        out[36] = tag;
        out[37] = self.flags;
        out[38..40].copy_from_slice(&code.to_le_bytes());
    }

    /// `None` for a status no [`Compact::pack`] writes.
    fn unpack(b: &[u8]) -> Option<Compact> {
        let f = |i: usize| f64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        let code = u16::from_le_bytes([b[38], b[39]]);
        let status = match b[36] {
            0 => Status::Ok,
            1 => Status::HttpError(code),
            2 => Status::StreamError,
            3 => Status::ClientAbort,
            4 => Status::UpstreamReset,
            5 => Status::Truncated,
            _ => return None,
        };
        Some(Compact {
            finished: f(0),
            e2e: f(1),
            ttft: f(2),
            tpot: f(3),
            output_tokens: u32::from_le_bytes(b[32..36].try_into().unwrap()),
            status,
            flags: b[37],
        })
    }
}

/// A series' records as a snapshot keeps them: byte strings of up to [`packed::CHUNK`]
/// records of [`PACKED_LEN`] bytes each, not a sequence of structs. A store holds up to
/// 65 536 records a series, most of a snapshot's bytes; written field by field they cost
/// ≈ 100 ns a record to encode, which made the snapshot the largest periodic cost of a
/// daemon with a tap's requests (docs/footprint.md#budgets-and-requests-at-steady-state).
/// Chunks, not one string, so that packing needs one small buffer (40 KiB, reused), not
/// one of megabytes that the allocator would map afresh, page by page, at every snapshot.
pub mod packed {
    use std::collections::VecDeque;

    use serde::de::{Deserializer, Error, SeqAccess, Visitor};
    use serde::ser::{SerializeSeq, Serializer};

    use super::{Compact, PACKED_LEN};

    /// Records a chunk holds at most.
    pub const CHUNK: usize = 1_024;

    /// One byte string, as a chunk is written (also by tests writing damaged chunks).
    pub(super) struct Bytes<'a>(pub(super) &'a [u8]);

    impl serde::Serialize for Bytes<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }

    pub fn serialize<S: Serializer>(records: &VecDeque<Compact>, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(records.len().div_ceil(CHUNK)))?;
        let mut buf = vec![0u8; records.len().min(CHUNK) * PACKED_LEN];
        let (front, back) = records.as_slices();
        // A chunk may span the deque's two halves: walk the records, not the halves.
        let mut all = front.iter().chain(back);
        let mut left = records.len();
        while left > 0 {
            let n = left.min(CHUNK);
            for (r, b) in all.by_ref().take(n).zip(buf.chunks_exact_mut(PACKED_LEN)) {
                r.pack(b);
            }
            seq.serialize_element(&Bytes(&buf[..n * PACKED_LEN]))?;
            left -= n;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<VecDeque<Compact>, D::Error> {
        struct Chunk(Vec<Compact>);
        impl<'de> serde::Deserialize<'de> for Chunk {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Chunk, D::Error> {
                d.deserialize_bytes(ChunkVisitor)
            }
        }
        struct ChunkVisitor;
        impl Visitor<'_> for ChunkVisitor {
            type Value = Chunk;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "a byte string of at most {CHUNK} records of {PACKED_LEN} bytes")
            }
            fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Chunk, E> {
                if !v.len().is_multiple_of(PACKED_LEN) || v.len() > CHUNK * PACKED_LEN {
                    return Err(E::invalid_length(v.len(), &self));
                }
                v.chunks_exact(PACKED_LEN)
                    .map(|b| Compact::unpack(b).ok_or_else(|| E::custom("a record with an unknown status")))
                    .collect::<Result<_, _>>()
                    .map(Chunk)
            }
        }
        struct Records;
        impl<'de> Visitor<'de> for Records {
            type Value = VecDeque<Compact>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("chunks of packed records")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                // The chunk count comes from the file: bound what it may reserve.
                let mut out = VecDeque::with_capacity(seq.size_hint().unwrap_or(0).min(64) * CHUNK);
                while let Some(Chunk(c)) = seq.next_element()? {
                    out.extend(c);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Source, TokenCount};

    fn record() -> RequestRecord {
        RequestRecord {
            source: Source::Tap,
            target: "t".into(),
            model: "m".into(),
            status: Status::Ok,
            finished_unix: 100.0,
            e2e_s: 2.0,
            ttft_s: Some(0.1),
            tpot_s: Some(0.02),
            prompt_tokens: Some(10),
            output_tokens: Some(TokenCount { value: 50, exact: false }),
            itl: Vec::new(),
            engine: None,
            request_id: None,
        }
    }

    #[test]
    fn keeps_the_numbers_in_48_bytes() {
        assert!(std::mem::size_of::<Compact>() <= 48, "{}", std::mem::size_of::<Compact>());
        let c = Compact::of(&record()).unwrap();
        assert_eq!((c.ttft(), c.tpot(), c.output_tokens), (Some(0.1), Some(0.02), 50));
        assert!(c.tokens_known() && !c.tokens_exact() && !c.tpot_exact());
        assert_eq!(c.started(), 98.0);
    }

    #[test]
    fn a_packed_record_reads_back_as_it_was() {
        use std::collections::VecDeque;
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Held(#[serde(with = "packed")] VecDeque<Compact>);
        // Past two chunks, and wrapped around the deque's buffer (two halves).
        let mut records: VecDeque<Compact> = (0..2_500usize)
            .map(|i| {
                let tokens =
                    i.is_multiple_of(2).then_some(TokenCount { value: 7 * i as u32, exact: i.is_multiple_of(4) });
                let ttft_s = (!i.is_multiple_of(3)).then_some(0.25 + i as f64 / 1e4);
                let r = RequestRecord { status: Status::EACH[i % 6], ttft_s, output_tokens: tokens, ..record() };
                Compact::of(&RequestRecord { finished_unix: 100.0 + i as f64, ..r }).unwrap()
            })
            .collect();
        records.rotate_left(700);
        assert!(!records.as_slices().1.is_empty(), "two halves");
        let bytes = postcard::to_allocvec(&Held(records.clone())).unwrap();
        // Three chunks (one byte), each a length (three bytes) and its records.
        assert_eq!(bytes.len(), 1 + 3 * 3 + records.len() * PACKED_LEN);
        let back = postcard::from_bytes::<Held>(&bytes).unwrap().0;
        // NaN (a missing latency) is not equal to itself: compare the bits.
        let bits = |c: &Compact| (c.finished.to_bits(), c.e2e.to_bits(), c.ttft.to_bits(), c.tpot.to_bits());
        assert_eq!(back.iter().map(bits).collect::<Vec<_>>(), records.iter().map(bits).collect::<Vec<_>>());
        let rest = |c: &Compact| (c.output_tokens, c.status, c.flags);
        assert_eq!(back.iter().map(rest).collect::<Vec<_>>(), records.iter().map(rest).collect::<Vec<_>>());
        let mut bad = bytes.clone();
        bad[1 + 3 + 36] = 9;
        assert!(postcard::from_bytes::<Held>(&bad).is_err(), "an unknown status is refused");
        let cut = postcard::to_allocvec(&vec![packed::Bytes(&bytes[4..4 + 39])]).unwrap();
        assert!(postcard::from_bytes::<Held>(&cut).is_err(), "a cut record is refused");
        let whole = postcard::to_allocvec(&vec![packed::Bytes(&bytes[4..4 + 40])]).unwrap();
        assert_eq!(postcard::from_bytes::<Held>(&whole).unwrap().0.len(), 1);
        let empty = postcard::to_allocvec(&Held(VecDeque::new())).unwrap();
        assert_eq!((empty.len(), postcard::from_bytes::<Held>(&empty).unwrap().0.len()), (1, 0));
    }

    #[test]
    fn refuses_impossible_numbers() {
        for bad in [
            RequestRecord { e2e_s: -1.0, ..record() },
            RequestRecord { finished_unix: f64::NAN, ..record() },
            RequestRecord { ttft_s: Some(f64::INFINITY), ..record() },
            RequestRecord { tpot_s: Some(-0.1), ..record() },
        ] {
            assert_eq!(Compact::of(&bad), Err(Invalid::BadNumber));
        }
    }

    #[test]
    fn one_streamed_token_meets_any_tpot() {
        use crate::request::tpot_vacuous;
        let one = RequestRecord { tpot_s: None, output_tokens: Some(TokenCount { value: 1, exact: true }), ..record() };
        assert!(tpot_vacuous(&Compact::of(&one).unwrap()) && tpot_vacuous(&one));
        // Counted, not known: the one event may have carried many tokens.
        let counted = RequestRecord { output_tokens: Some(TokenCount { value: 1, exact: false }), ..one.clone() };
        assert!(!tpot_vacuous(&Compact::of(&counted).unwrap()) && !tpot_vacuous(&counted));
        // Not streamed: no TTFT, so nothing is known about its tokens' timing.
        let whole = RequestRecord { ttft_s: None, ..one };
        assert!(!tpot_vacuous(&Compact::of(&whole).unwrap()) && !tpot_vacuous(&whole));
    }
}
