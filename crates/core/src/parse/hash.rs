//! The series-identity hash used for duplicate detection.
//!
//! Hashing is on the hot path (once per sample line), so it reads eight bytes at a time
//! with a folded 128-bit multiply instead of FNV's byte loop. Collisions are harmless
//! for correctness: the parser compares the series themselves before calling two
//! samples duplicates.

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
fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[inline]
fn half(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u64::from(u32::from_le_bytes(w))
}

#[inline]
fn bytes(seed: u64, b: &[u8]) -> u64 {
    let n = b.len();
    let mut h = seed ^ (n as u64).wrapping_mul(K3);
    let mut at = 0;
    while at + 8 <= n {
        h = fold_mul(h ^ word(b, at), K1);
        at += 8;
    }
    // The tail without a variable-length copy: overlapping fixed-size loads (the length
    // is already in `h`, so overlap cannot make two inputs collide systematically).
    let tail = if at == n {
        return h;
    } else if n >= 8 {
        word(b, n - 8)
    } else if n >= 4 {
        (half(b, 0) << 32) | half(b, n - 4)
    } else {
        (u64::from(b[0]) << 16) | (u64::from(b[n / 2]) << 8) | u64::from(b[n - 1])
    };
    fold_mul(h ^ tail, K2)
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
        for n in 0..40 {
            let a: Vec<u8> = (0..n as u8).collect();
            let mut b = a.clone();
            if let Some(x) = b.last_mut() {
                *x ^= 1;
                assert_ne!(bytes(0, &a), bytes(0, &b), "{n}");
            }
        }
    }
}
