//! The small statistics the capacity estimate rests on (docs/capacity.md#method): a robust
//! trend (Theil–Sen slope), its significance (Mann–Kendall), and the weighted isotonic
//! fit (pool-adjacent-violators) that encodes "more load never improves attainment".

/// Median of the pairwise slopes `(y_j − y_i) / (x_j − x_i)`: a trend that one outlier cannot
/// move. `None` with fewer than two distinct `x`.
pub fn theil_sen(xs: &[f64], ys: &[f64]) -> Option<f64> {
    let mut slopes = Vec::with_capacity(xs.len() * xs.len().saturating_sub(1) / 2);
    for i in 0..xs.len() {
        for j in i + 1..xs.len() {
            let dx = xs[j] - xs[i];
            if dx != 0.0 && (ys[j] - ys[i]).is_finite() {
                slopes.push((ys[j] - ys[i]) / dx);
            }
        }
    }
    median(&mut slopes)
}

/// The median of `v` (sorted in place); `None` when empty.
pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// The Mann–Kendall trend test of a series in time order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannKendall {
    /// Σ sign(y_j − y_i) over i < j.
    pub s: i64,
    /// The normal score with continuity correction (0 when `s` is 0).
    pub z: f64,
    /// One-sided p-value of an *increasing* trend.
    pub p_increasing: f64,
}

/// Mann–Kendall with the variance corrected for ties (Kendall 1975). A flat series has
/// `s = 0` and `p_increasing = 0.5`.
pub fn mann_kendall(ys: &[f64]) -> MannKendall {
    let n = ys.len();
    let mut s: i64 = 0;
    for i in 0..n {
        for j in i + 1..n {
            s += match ys[j].partial_cmp(&ys[i]) {
                Some(std::cmp::Ordering::Greater) => 1,
                Some(std::cmp::Ordering::Less) => -1,
                _ => 0,
            };
        }
    }
    let mut sorted: Vec<f64> = ys.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut ties = 0.0;
    let mut k = 0;
    while k < n {
        let mut m = k + 1;
        while m < n && sorted[m] == sorted[k] {
            m += 1;
        }
        let t = (m - k) as f64;
        ties += t * (t - 1.0) * (2.0 * t + 5.0);
        k = m;
    }
    let nf = n as f64;
    let var = (nf * (nf - 1.0) * (2.0 * nf + 5.0) - ties) / 18.0;
    let z = if var <= 0.0 || s == 0 { 0.0 } else { (s as f64 - (s.signum() as f64)) / var.sqrt() };
    MannKendall { s, z, p_increasing: if z == 0.0 { 0.5 } else { normal_sf(z) } }
}

/// P(Z > z) for a standard normal.
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function, Chebyshev fit with fractional error < 1.2e-7
/// (Numerical Recipes, `erfcc`): ample for a p-value compared with 0.05.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// The weighted least-squares fit of `y` that is non-increasing in index order, by the
/// pool-adjacent-violators algorithm: O(n). Weights must be positive.
pub fn pava_non_increasing(y: &[f64], w: &[f64]) -> Vec<f64> {
    let mut blocks = Vec::with_capacity(y.len());
    pava_blocks(y, w, &mut blocks);
    blocks.iter().flat_map(|&(m, _, n)| std::iter::repeat_n(m, n)).collect()
}

/// [`pava_non_increasing`] as its blocks of equal fitted value, in order: (weighted mean,
/// weight, length), into `blocks` (cleared first), so that a caller fitting many times
/// reuses one buffer.
pub fn pava_blocks(y: &[f64], w: &[f64], blocks: &mut Vec<(f64, f64, usize)>) {
    // A new point merges backwards while it rises above the block before it.
    blocks.clear();
    for (&yi, &wi) in y.iter().zip(w) {
        blocks.push((yi, wi, 1));
        while blocks.len() > 1 {
            let (m2, w2, n2) = blocks[blocks.len() - 1];
            let (m1, w1, n1) = blocks[blocks.len() - 2];
            if m2 <= m1 {
                break;
            }
            blocks.pop();
            let w = w1 + w2;
            *blocks.last_mut().expect("two blocks") = ((m1 * w1 + m2 * w2) / w, w, n1 + n2);
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// The min–max formula of isotonic regression (Barlow et al. 1972): for a
    /// non-increasing fit, ŷᵢ = min over j ≤ i of max over k ≥ i of the weighted mean of
    /// y[j..=k]. O(n³), obviously right.
    fn brute(y: &[f64], w: &[f64]) -> Vec<f64> {
        let mean = |j: usize, k: usize| {
            let sw: f64 = w[j..=k].iter().sum();
            y[j..=k].iter().zip(&w[j..=k]).map(|(a, b)| a * b).sum::<f64>() / sw
        };
        (0..y.len())
            .map(|i| {
                (0..=i)
                    .map(|j| (i..y.len()).map(|k| mean(j, k)).fold(f64::NEG_INFINITY, f64::max))
                    .fold(f64::INFINITY, f64::min)
            })
            .collect()
    }

    #[test]
    fn pava_matches_the_min_max_formula() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for case in 0..500 {
            let n = rng.random_range(1..12);
            let y: Vec<f64> = (0..n).map(|_| rng.random_range(0.0..1.0)).collect();
            let w: Vec<f64> = (0..n).map(|_| rng.random_range(0.1..50.0)).collect();
            let (got, want) = (pava_non_increasing(&y, &w), brute(&y, &w));
            for (g, e) in got.iter().zip(&want) {
                assert!((g - e).abs() < 1e-9, "case {case}: y={y:?} w={w:?}: {got:?} vs {want:?}");
            }
            assert!(got.windows(2).all(|p| p[0] >= p[1] - 1e-12), "non-increasing: {got:?}");
        }
    }

    #[test]
    fn pava_leaves_monotone_data_alone_and_pools_a_rise() {
        let y = [0.99, 0.98, 0.9, 0.5];
        assert_eq!(pava_non_increasing(&y, &[1.0; 4]), y);
        // 0.90 then 0.96 (weights 1 and 3) pool to 0.945.
        let got = pava_non_increasing(&[0.99, 0.90, 0.96, 0.5], &[1.0, 1.0, 3.0, 1.0]);
        assert!((got[1] - 0.945).abs() < 1e-12 && (got[2] - 0.945).abs() < 1e-12, "{got:?}");
    }

    #[test]
    fn mann_kendall_on_known_series() {
        // A strictly rising series of 8: S = 28, var = 8·7·21/18 = 65.33, z = 27/8.083 = 3.340.
        let up: Vec<f64> = (0..8).map(f64::from).collect();
        let mk = mann_kendall(&up);
        assert_eq!(mk.s, 28);
        assert!((mk.z - 3.3403).abs() < 1e-3, "{mk:?}");
        assert!(mk.p_increasing < 0.001, "{mk:?}");
        let down: Vec<f64> = up.iter().rev().copied().collect();
        assert!(mann_kendall(&down).p_increasing > 0.999);
        let flat = mann_kendall(&[3.0; 8]);
        assert_eq!((flat.s, flat.z, flat.p_increasing), (0, 0.0, 0.5));
        // Ties shrink the variance: 1,1,2,2 has S = 4, var = (4·3·13 − 2·2·1·9)/18 = 6.667.
        let t = mann_kendall(&[1.0, 1.0, 2.0, 2.0]);
        assert_eq!(t.s, 4);
        assert!((t.z - 3.0 / 6.6667f64.sqrt()).abs() < 1e-3, "{t:?}");
        // A noisy series with no trend is not significant.
        assert!(mann_kendall(&[5.0, 3.0, 6.0, 2.0, 5.0, 4.0, 3.0, 5.0]).p_increasing > 0.2);
    }

    #[test]
    fn normal_tail_matches_tables() {
        assert!((normal_sf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_sf(1.6449) - 0.05).abs() < 1e-4);
        assert!((normal_sf(-1.2816) - 0.9).abs() < 1e-4);
    }

    #[test]
    fn theil_sen_ignores_an_outlier() {
        let x: Vec<f64> = (0..9).map(f64::from).collect();
        let mut y: Vec<f64> = x.iter().map(|v| 2.0 * v + 1.0).collect();
        y[4] = 100.0;
        assert_eq!(theil_sen(&x, &y), Some(2.0));
        assert_eq!(theil_sen(&[1.0], &[1.0]), None);
    }
}
