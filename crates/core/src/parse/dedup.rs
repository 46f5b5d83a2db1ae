//! Duplicate-series detection, done once per scrape after all lines are parsed.
//!
//! A hash map probed per sample was the parser's biggest cost: every probe is a cache
//! miss in a multi-megabyte table. Instead the parser records each sample's series hash
//! in order, and this pass sorts (fingerprint, index) pairs with a stable LSD radix sort,
//! whose memory access is sequential. Equal fingerprints end up adjacent in line order,
//! so the first sample of a series wins, as in Prometheus.

use super::{Duplicate, Exposition, Label};

const FP_MASK: u64 = 0xffff_ff00_0000_0000;

/// Removes every sample whose series appeared earlier, recording it in `duplicates`.
/// `hashes[i]` is the series hash of `out.samples[i]`.
pub(super) fn remove_duplicates(out: &mut Exposition<'_>, hashes: &[u64]) {
    debug_assert_eq!(out.samples.len(), hashes.len());
    let n = out.samples.len();
    if n < 2 {
        return;
    }
    // Top 24 bits: fingerprint (three radix passes); low 32 bits: sample index (the
    // parser caps samples below 2^32). Distinct series sharing a fingerprint are sorted
    // out by the full hash in `resolve_run`.
    let mut keys: Vec<u64> = hashes.iter().enumerate().map(|(i, h)| (h & FP_MASK) | i as u64).collect();
    radix_sort_fingerprint(&mut keys);

    let mut dup_of: Vec<(u32, u32)> = Vec::new();
    let mut i = 0;
    while i < n {
        let fp = keys[i] >> 32;
        let mut j = i + 1;
        while j < n && keys[j] >> 32 == fp {
            j += 1;
        }
        if j - i > 1 {
            resolve_run(out, hashes, &keys[i..j], &mut dup_of);
        }
        i = j;
    }
    if dup_of.is_empty() {
        return;
    }
    dup_of.sort_unstable();
    for &(dup, first) in &dup_of {
        let s = &out.samples[dup as usize];
        out.families[s.family as usize].samples -= 1;
        out.duplicates.push(Duplicate {
            line: s.line,
            first_line: out.samples[first as usize].line,
            series: out.series_string(s),
        });
    }
    let mut next = dup_of.iter().map(|&(d, _)| d as usize).peekable();
    let mut idx = 0usize;
    out.samples.retain(|_| {
        let keep = next.peek() != Some(&idx);
        if !keep {
            next.next();
        }
        idx += 1;
        keep
    });
}

/// One run of samples sharing a 32-bit fingerprint, in line order. Runs are almost
/// always a real duplicate pair; a long run (a hostile body aiming at collisions) is
/// sorted by full hash first so the work stays O(r log r).
fn resolve_run(out: &Exposition<'_>, hashes: &[u64], run: &[u64], dup_of: &mut Vec<(u32, u32)>) {
    if let [a, b] = *run {
        // The common case, without allocating: a real duplicate or a fingerprint clash.
        let (a, b) = (a as u32, b as u32);
        if hashes[a as usize] == hashes[b as usize] && same_series(out, a, b) {
            dup_of.push((b, a));
        }
        return;
    }
    let mut by_hash: Vec<(u64, u32)> = run.iter().map(|&k| (hashes[(k as u32) as usize], k as u32)).collect();
    if by_hash.len() > 16 {
        by_hash.sort_unstable();
    }
    let mut firsts: Vec<u32> = Vec::new();
    let mut g = 0;
    while g < by_hash.len() {
        // With more than 16 entries, equal hashes are contiguous; otherwise treat the
        // whole run as one group.
        let end = if run.len() > 16 {
            let h = by_hash[g].0;
            g + by_hash[g..].iter().take_while(|e| e.0 == h).count()
        } else {
            by_hash.len()
        };
        firsts.clear();
        for &(h, idx) in &by_hash[g..end] {
            let found = firsts.iter().copied().find(|&f| hashes[f as usize] == h && same_series(out, f, idx));
            match found {
                Some(f) => dup_of.push((idx, f)),
                None => firsts.push(idx),
            }
        }
        g = end;
    }
}

fn same_series(out: &Exposition<'_>, a: u32, b: u32) -> bool {
    let (x, y) = (&out.samples[a as usize], &out.samples[b as usize]);
    x.name == y.name && same_labels(out.labels_of(x), out.labels_of(y))
}

/// Label sets are equal regardless of order (a label name appears once per sample).
pub(super) fn same_labels(a: &[Label<'_>], b: &[Label<'_>]) -> bool {
    a.len() == b.len() && a.iter().all(|l| b.iter().any(|m| m.name == l.name && m.value == l.value))
}

/// Stable sort by the fingerprint (the top 24 bits), eight bits per pass.
fn radix_sort_fingerprint(keys: &mut Vec<u64>) {
    let mut buf = vec![0u64; keys.len()];
    for shift in [40u32, 48, 56] {
        let mut counts = [0usize; 256];
        for &k in keys.iter() {
            counts[((k >> shift) & 0xff) as usize] += 1;
        }
        if counts.contains(&keys.len()) {
            continue; // every key has the same digit: the pass would not move anything
        }
        let mut offsets = [0usize; 256];
        let mut total = 0;
        for (o, c) in offsets.iter_mut().zip(counts) {
            *o = total;
            total += c;
        }
        for &k in keys.iter() {
            let d = ((k >> shift) & 0xff) as usize;
            buf[offsets[d]] = k;
            offsets[d] += 1;
        }
        std::mem::swap(keys, &mut buf);
    }
}

#[cfg(test)]
mod tests {
    use super::{radix_sort_fingerprint, remove_duplicates};
    use crate::parse::{Limits, parse};

    /// Forces every sample into one fingerprint run (as a collision attack would), long
    /// enough to take the sorted path, with and without equal full hashes.
    #[test]
    fn long_colliding_runs_still_find_exactly_the_duplicates() {
        let mut body = String::new();
        for i in 0..40 {
            body.push_str(&format!("m{{i=\"{i}\"}} {i}\n"));
        }
        for full_hash_collides in [false, true] {
            let mut e = parse(body.as_bytes(), &Limits::default()).unwrap();
            // Append copies of samples 3 and 17 as later lines.
            for (k, src) in [3usize, 17, 3].into_iter().enumerate() {
                let mut s = e.samples[src].clone();
                s.line = 41 + k as u32;
                s.value = -1.0;
                e.samples.push(s);
                e.families[0].samples += 1;
            }
            let hashes: Vec<u64> = e
                .samples
                .iter()
                .map(|s| {
                    let id: u64 = e.label(s, "i").unwrap().parse().unwrap();
                    (0xabcd_u64 << 32) | if full_hash_collides { 0 } else { id }
                })
                .collect();
            remove_duplicates(&mut e, &hashes);
            assert_eq!(e.samples.len(), 40);
            assert!(e.samples.iter().all(|s| s.value >= 0.0));
            assert_eq!(e.families[0].samples, 40);
            let d: Vec<_> = e.duplicates.iter().map(|d| (d.line, d.first_line)).collect();
            assert_eq!(d, vec![(41, 4), (42, 18), (43, 4)]);
            assert_eq!(e.duplicates[0].series, "m{i=\"3\"}");
        }
    }

    #[test]
    fn radix_sort_is_stable_and_sorted() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut keys: Vec<u64> = (0..5000u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x % 97) << 40) | (x & 0xff00_0000_0000_0000) | ((x & 0xff) << 32) | i
            })
            .collect();
        let mut want = keys.clone();
        want.sort_by_key(|k| k >> 40);
        radix_sort_fingerprint(&mut keys);
        assert_eq!(keys, want);
    }
}
