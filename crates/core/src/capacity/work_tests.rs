//! The book's work per tick counted, not timed: after a minute and after a day of history
//! it is the same bounded work per interval, and estimates read sums whose size the rates
//! seen bound, not the intervals.

use std::collections::BTreeMap;

use super::*;
use crate::duration::Window;
use crate::report::{
    GaugeStats, Health, ModelReport, Report, SloReport, SloStatus, SloValues, TargetReport, WindowReport,
};
use crate::slo::{Bounded, Clause, Objective, Scope};

pub(super) fn slo() -> Slo {
    Slo {
        name: "chat".into(),
        ttft: Some(Duration::from_millis(500)),
        tpot: None,
        e2e: None,
        objective: Objective::new(0.95).unwrap(),
        scope: Scope::all(),
    }
}

/// `target` at `t_ms` under a two-hour wave of load from 1 to 9 requests/s, past a knee at 5,
/// its prompts a little longer and shorter with the load.
fn target(target: &str, t_ms: i64) -> TargetReport {
    let phase = (t_ms as f64 / 7_200_000.0) * std::f64::consts::TAU;
    let rate = 5.0 - 4.0 * phase.cos();
    let a = if rate <= 5.0 { 0.99 } else { (0.99 - 0.3 * (rate - 5.0)).max(0.2) };
    let mut w = WindowReport::empty(Window::from_secs(60));
    w.coverage = 1.0;
    w.requests_per_second = Some(rate);
    w.running = Some(GaugeStats { first: 10.0, last: 10.0, mean: 10.0, max: 10.0 });
    w.waiting = Some(GaugeStats { first: 0.0, last: 0.0, mean: 0.0, max: 0.0 });
    w.mean_prompt_tokens = Some(400.0 + 20.0 * phase.sin());
    w.mean_output_tokens = Some(120.0);
    let joint = Bounded { lower: (a - 0.01).max(0.0), estimate: a, upper: (a + 0.01).min(1.0) };
    w.slos = vec![SloReport {
        slo: "chat".into(),
        objective: 0.95,
        status: SloStatus::Evaluated(SloValues {
            attainment: BTreeMap::from([(Clause::Joint, joint)]),
            burn_rate: joint,
            goodput_requests_per_second: None,
            goodput_tokens_per_second: None,
            requests: rate * 60.0,
            failed: 0.0,
        }),
    }];
    TargetReport {
        target: target.into(),
        engine: None,
        health: Health { up: true, process_start_s: Some(1.0), ..Health::default() },
        models: vec![ModelReport { model: "m".into(), windows: vec![w] }].into(),
    }
}

pub(super) fn report(targets: usize, t_ms: i64) -> Report {
    Report { t_ms, targets: (0..targets).map(|k| target(&format!("t{k}"), t_ms)).collect(), ..Report::default() }
}

/// Few draws: the work counted does not depend on them, and the test stays quick in debug.
fn book() -> CapacityBook {
    CapacityBook::new(vec![slo()], CapacityConfig { fit: Fit { draws: 8, ..Fit::default() }, ..Default::default() })
}

/// The work and the estimates of `ticks` ticks 5 s apart from `t_ms`.
fn measure(book: &mut CapacityBook, targets: usize, t_ms: &mut i64, ticks: usize) -> (u64, u64) {
    let (work, made) = (book.work(), book.estimates_made);
    for _ in 0..ticks {
        *t_ms += 5_000;
        book.feed(&report(targets, *t_ms));
    }
    (book.work() - work, book.estimates_made - made)
}

/// The most work one interval can take, `sums` being the older intervals' sums held: its
/// entry (and the oldest recent one's passing to the sums, a sum per attainment end and
/// past settling level), then its refresh: a visit to each recent interval, a share per
/// attainment end and settling level of each, and every sum read. Once a day's sums are
/// dropped by the hour (a pass over them) on top.
fn max_work_per_interval(sums: usize) -> u64 {
    let fit = Fit::default();
    let entry = 2 + 2 * past::PAST_LEVELS as u64;
    entry + history::RECENT as u64 * (1 + 2 * fit.settle_levels as u64) + sums as u64
}

#[test]
fn a_tick_after_a_day_does_the_work_of_a_tick_after_a_minute() {
    let mut minute = book();
    let mut t = 0;
    while t < 60_000 {
        minute.feed(&report(1, t));
        t += 5_000;
    }
    let (minute_work, minute_made) = measure(&mut minute, 1, &mut t, 240);
    // A day and an hour: the history is full (a day) and its oldest intervals leave, and
    // the decay's once-a-day new reference lies behind.
    let mut day = book();
    let mut t_day = 0;
    while t_day < 25 * 3_600_000 {
        day.feed(&report(1, t_day));
        t_day += SPACING.as_millis() as i64;
    }
    let series = day.series.values().next().expect("one series");
    let n = series.history.len();
    assert!((5_760..=5_760 + 240).contains(&n), "a day of intervals held (to the hour): {n}");
    let sums = series.history.sums();
    let (day_work, day_made) = measure(&mut day, 1, &mut t_day, 240);
    // Twenty minutes at 5 s, 80 intervals. After a minute the wave rises: each interval is
    // refreshed. After a day it falls: the first of each minute's four, and the few a
    // noisy trend test calls rising.
    assert_eq!(minute_made, 80);
    assert!((20..40).contains(&day_made), "{day_made}");
    assert!(minute_work <= 80 * max_work_per_interval(0), "{minute_work}");
    assert!(day_work <= 80 * max_work_per_interval(sums) + sums as u64, "{day_work}");
    // The recent intervals are as many after twenty minutes as after a day; what a day adds
    // is its sums, read once per refresh: at most twice the work, never a pass over the
    // day's intervals.
    assert!(day_work <= 2 * minute_work, "{day_work} against {minute_work}");
    // The sums are bounded by the rates seen (a decade of rate here), not by the 5,760
    // intervals: per workload bucket at most the bins over the decade, per attainment end,
    // table and class.
    let per_bucket = 2 * (1 + past::PAST_LEVELS) * (Fit::default().bins_per_decade as usize + 1) * past::PAST_CLASSES;
    assert!(sums <= 3 * per_bucket, "{sums} sums");
    eprintln!("work per 20 minutes: after a minute {minute_work}, after a day {day_work}; {sums} sums");
}

#[test]
fn refreshes_spread_over_the_ticks_between_intervals() {
    // 30 series under a flat load whose intervals all fall due on the same tick (every
    // 15 s), refreshed at the first interval of each minute: their refreshes are spread
    // over the three ticks of 5 s an interval spans, ten per tick.
    let flat =
        |t_ms| Report { t_ms, targets: (0..30).map(|k| target(&format!("t{k}"), 0)).collect(), ..Report::default() };
    let mut book = book();
    let mut t = 0;
    book.feed(&flat(t));
    assert_eq!(book.estimates_made, 30, "the first tick, with no tick before it, refreshes every series");
    let mut per_tick = Vec::new();
    for _ in 0..24 {
        t += 5_000;
        let made = book.estimates_made;
        book.feed(&flat(t));
        per_tick.push(book.estimates_made - made);
    }
    let expected: Vec<u64> = [0; 11].into_iter().chain([10; 3]).chain([0; 9]).chain([10]).collect();
    assert_eq!(per_tick, expected);
    // Each series' report says what its newest interval says, whether refreshed or not.
    let reports = book.feed(&flat(t + 5_000));
    assert_eq!(reports.len(), 30);
    assert!(reports.iter().all(|r| r.intervals == 9));
}

#[test]
fn a_restored_book_goes_on_without_a_first_pass() {
    // Two hours of history, saved and read back as a snapshot holds it.
    let mut book = book();
    let mut t = 0;
    while t < 2 * 3_600_000 {
        book.feed(&report(2, t));
        t += 5_000;
    }
    let saved: Vec<Vec<u8>> = ["t0", "t1"].iter().map(|n| postcard::to_allocvec(&book.saved(n)).unwrap()).collect();
    let mut restored = self::book();
    for (n, bytes) in ["t0", "t1"].iter().zip(&saved) {
        let s: saved::SavedCapacity = postcard::from_bytes(bytes).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(restored.restore(n, s), 1);
    }
    // Nothing is rebuilt: the sums come back as they were, no estimate is made, and the
    // next ticks give the same reports as the book that never stopped.
    assert_eq!(restored.work(), 0);
    assert_eq!(restored.estimates_made, 0);
    for _ in 0..6 {
        t += 5_000;
        let (a, b) = (book.feed(&report(2, t)), restored.feed(&report(2, t)));
        assert_eq!(a, b);
        assert!(a.iter().all(|r| !r.slos[0].estimates.is_empty()), "{a:?}");
    }
    assert_eq!(restored.estimates_made, 2, "one refresh per series at the minute's first interval");
    // Saved under another objective, the history starts afresh.
    let other = Slo { objective: Objective::new(0.99).unwrap(), ..slo() };
    let mut changed = CapacityBook::new(vec![other], book.cfg);
    assert_eq!(changed.restore("t0", postcard::from_bytes(&saved[0]).unwrap()), 0);
}
