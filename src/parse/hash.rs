//! The series-identity hash used for duplicate detection, and the pass-through hasher
//! that lets a `HashMap<u64, _>` use it without hashing it a second time.
//!
//! Hashing is on the hot path (once per sample line), so it reads eight bytes at a time
//! with a folded 128-bit multiply instead of FNV's byte loop. Collisions are harmless
//! for correctness: the parser compares the series themselves before calling two
//! samples duplicates.

use std::hash::{BuildHasher, Hasher};

use super::Label;

const K1: u64 = 0x9e37_79b9_7f4a_7c15;
const K2: u64 = 0xa076_1d64_78bd_642f;
const K3: u64 = 0xe703_7ed1_a0b4_28db;

#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

#[inline]
fn bytes(seed: u64, b: &[u8]) -> u64 {
    let mut h = seed ^ (b.len() as u64).wrapping_mul(K3);
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = fold_mul(h ^ u64::from_le_bytes(w), K1);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = fold_mul(h ^ u64::from_le_bytes(w), K2);
    }
    h
}

/// An order-independent hash of a series identity: label order does not make a new
/// series, so per-label hashes are combined with a commutative sum.
pub(super) fn series(name: &str, labels: &[Label<'_>]) -> u64 {
    let mut h = bytes(K2, name.as_bytes());
    for l in labels {
        let lh = bytes(bytes(K3, l.name.as_bytes()), l.value.as_bytes());
        h = h.wrapping_add(fold_mul(lh, K1));
    }
    fold_mul(h ^ (h >> 29), K3)
}

/// A `BuildHasher` for keys that are already uniformly distributed `u64` hashes.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PassThrough;

impl BuildHasher for PassThrough {
    type Hasher = PassThroughHasher;
    fn build_hasher(&self) -> PassThroughHasher {
        PassThroughHasher(0)
    }
}

#[derive(Debug, Default)]
pub(super) struct PassThroughHasher(u64);

impl Hasher for PassThroughHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, b: &[u8]) {
        // Only `write_u64` is used by `HashMap<u64, _>`; mix anything else in anyway.
        self.0 = bytes(self.0 ^ K1, b);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn l<'a>(n: &'a str, v: &'a str) -> Label<'a> {
        Label { name: n, value: Cow::Borrowed(v) }
    }

    #[test]
    fn label_order_does_not_matter_but_content_does() {
        let a = series("m", &[l("a", "1"), l("b", "2")]);
        assert_eq!(a, series("m", &[l("b", "2"), l("a", "1")]));
        assert_ne!(a, series("m", &[l("a", "2"), l("b", "1")]));
        assert_ne!(a, series("m", &[l("a", "12"), l("b", "")]));
        assert_ne!(a, series("n", &[l("a", "1"), l("b", "2")]));
        assert_ne!(series("m", &[]), series("m_", &[]));
        // Tails shorter than eight bytes differ from their zero-padded forms.
        assert_ne!(bytes(0, b"ab"), bytes(0, b"ab\0"));
    }
}
