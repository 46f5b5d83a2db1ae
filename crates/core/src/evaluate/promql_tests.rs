//! Hand-computed cases for the PromQL ports; each expectation is worked out in a comment.

use super::*;

const INF: f64 = f64::INFINITY;

fn close(got: Option<f64>, want: f64) -> bool {
    got.is_some_and(|g| (g - want).abs() <= 1e-12 * want.abs().max(1.0))
}

fn acc(points: &[(i64, f64)]) -> RangeAcc {
    let mut a = RangeAcc::new(points[0].0, points[0].1);
    for &(t, v) in &points[1..] {
        a.push(t, v, false);
    }
    a
}

#[test]
fn rate_extrapolates_to_both_edges() {
    // Range (0, 60 s]. Samples 5..50 s every 15 s rising 15 each: increase 45 over 45 s,
    // 5 s to the start and 10 s to the end are both under 1.1 × 15 s, zero point is
    // 45·10/45 = 10 s back (> 5 s), so the increase extrapolates to 45·60/45 = 60.
    let a = acc(&[(5_000, 10.0), (20_000, 25.0), (35_000, 40.0), (50_000, 55.0)]);
    assert!(close(extrapolated_increase(&a, 60_000, 60_000), 60.0));
    assert!(close(extrapolated_rate(&a, 60_000, 60_000), 1.0));
}

#[test]
fn rate_stops_at_the_counters_zero_point() {
    // Same spacing, first value 1: zero point is 45·1/45 = 1 s back, shorter than 5 s.
    let a = acc(&[(5_000, 1.0), (20_000, 16.0), (35_000, 31.0), (50_000, 46.0)]);
    assert!(close(extrapolated_increase(&a, 60_000, 60_000), 56.0));
}

#[test]
fn rate_extrapolates_only_half_a_spacing_past_a_gap() {
    // First sample 20 s after the start ≥ 16.5 s: extrapolate 7.5 s. (30+7.5+10)/30 · 30.
    let a = acc(&[(20_000, 100.0), (35_000, 115.0), (50_000, 130.0)]);
    assert!(close(extrapolated_increase(&a, 60_000, 60_000), 47.5));
}

#[test]
fn three_x_clips_the_zero_point_after_the_threshold() {
    // dStart 20 s ≥ 16.5 → 7.5 s; zero point 30·3/30 = 3 s < 7.5 s → 3 s. 2.42 would have
    // compared 3 s with 20 s first and landed on the same 3 s; with first value 10 the
    // zero point (10 s) sits between 7.5 and 16.5: 3.x takes 7.5 s.
    let a = acc(&[(20_000, 3.0), (35_000, 18.0), (50_000, 33.0)]);
    assert!(close(extrapolated_increase(&a, 60_000, 60_000), 30.0 * 43.0 / 30.0));
    let b = acc(&[(20_000, 10.0), (35_000, 25.0), (50_000, 40.0)]);
    assert!(close(extrapolated_increase(&b, 60_000, 60_000), 47.5));
}

#[test]
fn resets_add_the_value_before_the_drop() {
    // 10 → 20 → 5 → 15: 15 − 10 + 20 = 25.
    let a = acc(&[(15_000, 10.0), (30_000, 20.0), (45_000, 5.0), (60_000, 15.0)]);
    assert_eq!(a.raw_increase(), 25.0);
    let mut f = RangeAcc::new(0, 10.0);
    f.push(1, 20.0, false);
    f.push(2, 25.0, true); // restarted and already past its old value
    f.push(3, 30.0, false);
    assert_eq!(f.raw_increase(), 30.0 - 10.0 + 20.0);
}

#[test]
fn one_sample_has_no_rate() {
    let a = RangeAcc::new(1_000, 5.0);
    assert_eq!(extrapolated_rate(&a, 60_000, 60_000), None);
    assert_eq!(rate(&a, 60_000, 60_000, RateMode::NaiveForTests), None);
}

#[test]
fn naive_rate_is_raw_increase_over_range() {
    let a = acc(&[(5_000, 10.0), (20_000, 25.0), (35_000, 40.0), (50_000, 55.0)]);
    assert!(close(rate(&a, 60_000, 60_000, RateMode::NaiveForTests), 45.0 / 60.0));
}

fn hq(q: f64, b: &[(f64, f64)]) -> Quantile {
    histogram_quantile(q, b)
}

#[test]
fn quantile_interpolates_inside_its_bucket() {
    let b = [(2.0, 20.0), (1.0, 10.0), (INF, 20.0)]; // unsorted on purpose
    // rank 10 lands in (0, 1]: 0 + 1·10/10.
    assert_eq!(hq(0.5, &b), Quantile { value: 1.0, bracket: Some((0.0, 1.0)) });
    // rank 15 lands in (1, 2]: 1 + 1·5/10.
    assert_eq!(hq(0.75, &b), Quantile { value: 1.5, bracket: Some((1.0, 2.0)) });
}

#[test]
fn quantile_in_the_inf_bucket_is_the_second_highest_bound() {
    let b = [(1.0, 10.0), (2.0, 20.0), (INF, 30.0)];
    assert_eq!(hq(0.9, &b), Quantile { value: 2.0, bracket: Some((2.0, INF)) });
}

#[test]
fn quantile_edge_rules() {
    let b = [(1.0, 10.0), (INF, 10.0)];
    assert!(hq(f64::NAN, &b).value.is_nan());
    assert_eq!(hq(-0.1, &b).value, f64::NEG_INFINITY);
    assert_eq!(hq(1.1, &b).value, INF);
    assert!(hq(0.5, &[(1.0, 10.0), (2.0, 10.0)]).value.is_nan(), "no +Inf bucket");
    assert!(hq(0.5, &[(1.0, 0.0), (INF, 0.0)]).value.is_nan(), "no observations");
    assert!(hq(0.5, &[(INF, 5.0)]).value.is_nan(), "one bucket");
    assert!(hq(0.5, &[]).value.is_nan());
    assert_eq!(hq(0.5, &b).bracket, Some((0.0, 1.0)));
    assert_eq!(hq(0.5, &[(f64::NAN, 1.0), (INF, 2.0)]).bracket, None);
}

#[test]
fn lowest_bucket_with_a_non_positive_bound_returns_the_bound() {
    let b = [(-1.0, 5.0), (0.0, 10.0), (INF, 10.0)];
    assert_eq!(hq(0.2, &b).value, -1.0);
}

#[test]
fn equal_bounds_coalesce_and_decreases_flatten() {
    // "1" and "1.0" from two shards add up: (1, 10), (+Inf, 10); rank 5 → 0.5.
    assert_eq!(hq(0.5, &[(1.0, 5.0), (1.0, 5.0), (INF, 10.0)]).value, 0.5);
    // 10, 8, 20 → 10, 10, 20; rank 10 → bucket (0, 1].
    assert_eq!(hq(0.5, &[(1.0, 10.0), (2.0, 8.0), (INF, 20.0)]).value, 1.0);
}

#[test]
fn small_deltas_are_ignored_without_advancing_prev() {
    let mut b = vec![(1.0, 100.0), (2.0, 100.0 + 1e-11), (3.0, 100.0 + 2e-11), (4.0, 150.0), (INF, 140.0)];
    ensure_monotonic_and_ignore_small_deltas(&mut b, SMALL_DELTA_TOLERANCE);
    let counts: Vec<f64> = b.iter().map(|x| x.1).collect();
    assert_eq!(counts, vec![100.0, 100.0, 100.0, 150.0, 150.0]);
    assert!(almost_equal(0.0, 0.0, 1e-12));
    assert!(!almost_equal(0.0, 1e-300, 1e-12));
    assert!(almost_equal(f64::NAN, f64::NAN, 1e-12));
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    fn buckets() -> impl Strategy<Value = Vec<(f64, f64)>> {
        // Finite bounds 0.001..1000, increments 0..50 per bucket, then +Inf.
        proptest::collection::vec((0.001f64..1000.0, 0.0f64..50.0), 1..20).prop_map(|raw| {
            let mut les: Vec<f64> = raw.iter().map(|r| r.0).collect();
            les.sort_by(f64::total_cmp);
            les.dedup();
            let mut cum = 0.0;
            let mut out: Vec<(f64, f64)> = les
                .into_iter()
                .zip(raw.iter().map(|r| r.1))
                .map(|(le, inc)| {
                    cum += inc;
                    (le, cum)
                })
                .collect();
            out.push((f64::INFINITY, cum + 1.0));
            out
        })
    }

    proptest! {
        #[test]
        fn quantiles_rise_with_phi_and_sit_in_their_bracket(b in buckets(), q1 in 0.0f64..=1.0, q2 in 0.0f64..=1.0) {
            let (lo, hi) = if q1 <= q2 { (q1, q2) } else { (q2, q1) };
            let a = histogram_quantile(lo, &b);
            let c = histogram_quantile(hi, &b);
            prop_assert!(a.value <= c.value, "{a:?} > {c:?}");
            for x in [a, c] {
                let (l, u) = x.bracket.expect("a bracket for a finite quantile");
                prop_assert!(l <= x.value && x.value <= u, "{x:?}");
            }
        }

        #[test]
        fn rate_of_a_steady_counter_is_its_slope(start in 1_000.0f64..1e6, slope in 0.1f64..100.0, n in 3usize..30, phase in 1i64..999) {
            // Samples every second, the first `phase` ms after the range start: every edge
            // is under 1.1 spacings and the zero point is far, so rate is exactly the slope.
            let range_ms = n as i64 * 1000;
            let mut a = RangeAcc::new(phase, start);
            for i in 1..n {
                a.push(phase + i as i64 * 1000, start + slope * i as f64, false);
            }
            let r = extrapolated_rate(&a, range_ms, range_ms).unwrap();
            prop_assert!((r - slope).abs() <= 1e-9 * slope, "{r} vs {slope}");
        }
    }
}
