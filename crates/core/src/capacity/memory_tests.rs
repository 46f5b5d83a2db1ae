//! Heap bytes of one target and model's capacity history after 20 minutes, 6 hours and a
//! day (docs/footprint.md#capacity-at-steady-state), counted from the structures.

use super::work_tests::{report, slo};
use super::*;

/// The bytes of the history of one target and model with one SLO judged from histogram
/// brackets, after 20 minutes, 6 hours and 24 hours of a two-hour wave of load.
fn bytes_after() -> [(usize, usize, usize); 3] {
    let mut book = CapacityBook::new(
        vec![slo()],
        CapacityConfig { fit: Fit { draws: 8, ..Fit::default() }, ..Default::default() },
    );
    let mut t = 0;
    [20 * 60_000, 6 * 3_600_000, 24 * 3_600_000].map(|end| {
        while t <= end {
            book.feed(&report(1, t));
            t += SPACING.as_millis() as i64;
        }
        let h = &book.series.values().next().unwrap().history;
        (h.len(), h.heap_bytes(), h.sums())
    })
}

#[test]
fn a_day_of_history_is_at_most_75_kib() {
    let [m20, h6, h24] = bytes_after();
    for (name, (n, bytes, sums)) in [("20 min", m20), ("6 h", h6), ("24 h", h24)] {
        eprintln!("capacity history after {name}: {n} intervals, {bytes} bytes, {sums} sums");
    }
    assert_eq!(m20.0, 81);
    assert!(h24.0 >= 5_760, "a day of intervals: {}", h24.0);
    // Goal: ≲ 75 KiB per target and model at a day (docs/footprint.md).
    assert!(h24.1 <= 75 * 1024, "{} bytes", h24.1);
    // The recent intervals are what twenty minutes hold already; beyond them only sums.
    assert!(h24.1 <= m20.1 + h24.2 * 24 + 4096, "{} against {}", h24.1, m20.1);
}
