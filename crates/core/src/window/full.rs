//! The full part of a window store: the scrapes inside the longest configured window, every
//! series kept, in [`Segment`]s.
//!
//! A segment holds up to [`KEYFRAME_EVERY`] consecutive scrapes of one layout: the first as
//! its values packed against zeros (the keyframe, `column::Frame`), each other as its packed
//! difference from the one before (`column`), all the differences in one byte buffer. A scrape of a vLLM rank (142 series) packs to ≈ 140
//! bytes; stored on its own, as a ring slot and an allocation of its bytes, it cost ≈ 60
//! bytes more (the slot's 40, the allocation's header and size-class rounding), and the ring
//! grew to the next power of two: a third of the full part's memory
//! (docs/memory.md#the-full-part-in-segments). Here a scrape costs its bytes and 8 more (its
//! time and where its bytes end).
//!
//! Dropping the oldest scrape only moves the segment's start (`skip`): its bytes stay until
//! the whole segment goes, as a keyframe every 64 scrapes already bounds what a decode reads.
//! A store shares its segments with its clones (`Arc`), so a snapshot's copy of a store
//! costs a word per segment; the store copies a segment a clone still holds before changing
//! it.

use std::sync::Arc;

use super::column::{Frame, decode_packed, pack};
use super::layout::Layout;

/// A keyframe at least every this many scrapes (a segment's length), so a range starting
/// anywhere decodes at most this many extra scrapes.
pub const KEYFRAME_EVERY: usize = 64;

/// How a stored scrape is encoded, as a snapshot copies it (`saved`).
pub(super) enum Encoded<'a> {
    /// A keyframe: the values themselves.
    Raw(&'a [f64]),
    /// The packed difference from the scrape before it.
    Delta(&'a [u8]),
}

/// Consecutive full scrapes of one layout (module docs).
#[derive(Debug, Clone)]
pub(super) struct Segment {
    pub(super) layout: Arc<Layout>,
    /// The first scrape's values (kept after it is dropped), packed: the base of the
    /// second's difference.
    key: Frame,
    /// The first scrape's time.
    t0: i64,
    /// Every scrape's time after `t0`, the first (0) included.
    times: Vec<u32>,
    /// Where scrape `j`'s difference (`j ≥ 1`) ends in `bytes`; it starts where `j − 1`'s
    /// ends (the first at 0).
    ends: Vec<u32>,
    bytes: Vec<u8>,
    /// Scrapes dropped from the front.
    skip: usize,
}

impl Segment {
    /// A segment starting with a scrape at `t_ms`; `bytes` is what its differences are
    /// expected to take (the segment before it, full, took that much): reserved at once, so
    /// that the buffer neither grows by doubling nor is copied when the segment closes.
    pub(super) fn new(layout: Arc<Layout>, t_ms: i64, values: &[f64], bytes: usize) -> Segment {
        let mut times = Vec::with_capacity(KEYFRAME_EVERY);
        times.push(0);
        Segment {
            layout,
            key: Frame::new(values),
            t0: t_ms,
            times,
            ends: Vec::with_capacity(KEYFRAME_EVERY - 1),
            bytes: Vec::with_capacity(bytes + bytes / 16),
            skip: 0,
        }
    }

    /// Bytes of the differences held; `Some` only for a segment of [`KEYFRAME_EVERY`]
    /// scrapes, what the next segment of the layout is likely to need.
    pub(super) fn full_bytes(&self) -> Option<usize> {
        (self.times.len() == KEYFRAME_EVERY).then_some(self.bytes.len())
    }

    /// Whether a scrape at `t_ms` (newer than the segment's) with `layout` can join it.
    pub(super) fn fits(&self, t_ms: i64, layout: &Arc<Layout>) -> bool {
        Arc::ptr_eq(&self.layout, layout)
            && self.times.len() < KEYFRAME_EVERY
            && t_ms.checked_sub(self.t0).is_some_and(|d| u32::try_from(d).is_ok())
            // A difference packs to at most 10 bytes a series (a varint token).
            && u32::try_from(self.bytes.len().saturating_add(self.key.len().saturating_mul(10))).is_ok()
    }

    /// Appends a scrape; `prev` holds the values of the scrape before it (the newest here).
    pub(super) fn push(&mut self, t_ms: i64, values: &[f64], prev: &[f64]) {
        pack(values, prev, &mut self.bytes);
        // `fits` said both do.
        self.ends.push(u32::try_from(self.bytes.len()).unwrap_or(u32::MAX));
        self.times.push(u32::try_from(t_ms - self.t0).unwrap_or(u32::MAX));
    }

    /// Gives back what a segment that will take no more scrapes over-allocated.
    pub(super) fn close(&mut self) {
        self.times.shrink_to_fit();
        self.ends.shrink_to_fit();
        // Not for the few bytes a reserve that guessed well left over: that is a copy.
        if self.bytes.capacity() - self.bytes.len() > self.bytes.len() / 8 {
            self.bytes.shrink_to_fit();
        }
    }

    /// Scrapes still stored.
    pub(super) fn len(&self) -> usize {
        self.times.len() - self.skip
    }

    /// Drops the oldest stored scrape.
    pub(super) fn drop_oldest(&mut self) {
        self.skip = (self.skip + 1).min(self.times.len());
    }

    /// The time of stored scrape `k` (0: the oldest).
    pub(super) fn t(&self, k: usize) -> i64 {
        self.t0 + i64::from(self.times[self.skip + k])
    }

    pub(super) fn last_t(&self) -> i64 {
        self.t0 + i64::from(self.times[self.times.len() - 1])
    }

    /// Stored scrapes at or before `t_ms`.
    pub(super) fn count_until(&self, t_ms: i64) -> usize {
        let Some(d) = t_ms.checked_sub(self.t0) else { return 0 };
        let at_or_before = self.times.partition_point(|&o| i64::from(o) <= d);
        at_or_before.saturating_sub(self.skip)
    }

    /// Applies scrape `j`'s difference (counting those dropped) to `cur`, which holds
    /// scrape `j − 1`'s values; scrape 0 is the keyframe.
    fn apply(&self, j: usize, cur: &mut Vec<f64>) -> bool {
        if j == 0 {
            return self.key.decode_into(cur);
        }
        let start = if j == 1 { 0 } else { self.ends[j - 2] as usize };
        let end = self.ends[j - 1] as usize;
        match self.bytes.get(start..end) {
            Some(b) if cur.len() == self.key.len() => decode_packed(b, cur),
            _ => false,
        }
    }

    /// Decodes stored scrape `k` into `cur`, which holds stored scrape `k − 1`'s values (or,
    /// for `k = 0`, the scrape dropped just before it): one difference, not a walk from the
    /// keyframe.
    pub(super) fn step(&self, k: usize, cur: &mut Vec<f64>) -> bool {
        self.apply(self.skip + k, cur)
    }

    /// Whether stored scrape `k` is the keyframe, which decodes without the scrape before.
    pub(super) fn is_key(&self, k: usize) -> bool {
        self.skip + k == 0
    }

    /// Decodes stored scrape `k` into `out`, from the keyframe.
    pub(super) fn decode(&self, k: usize, out: &mut Vec<f64>) -> bool {
        (0..=self.skip + k).all(|j| self.apply(j, out))
    }

    /// Calls `f(k, t_ms, values)` for the stored scrapes from `k = from` on, oldest first;
    /// stops at the first `false` from `f`. `false` if a difference does not decode (never
    /// one `push` wrote).
    pub(super) fn for_each(&self, from: usize, mut f: impl FnMut(usize, i64, &[f64]) -> bool) -> bool {
        let mut cur = Vec::with_capacity(self.key.len());
        for j in 0..self.times.len() {
            if !self.apply(j, &mut cur) {
                return false;
            }
            if j >= self.skip + from && !f(j - self.skip, self.t0 + i64::from(self.times[j]), &cur) {
                break;
            }
        }
        true
    }

    /// Calls `f(t_ms, encoded)` for each stored scrape, oldest first, in the encoding a
    /// snapshot copies: the oldest stored raw (decoded when scrapes before it were dropped),
    /// the others as the bytes of their difference. `false` if the oldest does not decode.
    pub(super) fn for_each_encoded(&self, mut f: impl FnMut(i64, Encoded<'_>)) -> bool {
        let mut first = Vec::new();
        if self.len() == 0 || !self.decode(0, &mut first) {
            return self.len() == 0;
        }
        f(self.t(0), Encoded::Raw(&first));
        for j in self.skip + 1..self.times.len() {
            let start = if j == 1 { 0 } else { self.ends[j - 2] as usize };
            f(self.t0 + i64::from(self.times[j]), Encoded::Delta(&self.bytes[start..self.ends[j - 1] as usize]));
        }
        true
    }

    pub(super) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        // The segment itself is behind an `Arc`: its fields and the two counts.
        size_of::<Segment>()
            + 2 * size_of::<usize>()
            + self.key.heap_bytes()
            + (self.times.capacity() + self.ends.capacity()) * size_of::<u32>()
            + self.bytes.capacity()
    }
}
