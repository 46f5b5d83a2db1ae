//! The capacity book through a snapshot: its histories come back as they were, under the
//! same SLOs only.

use std::collections::BTreeMap;

use super::{CONFIG, RestorePart, T0, Why, format, identity, restore_into, snapshot, world};
use crate::duration::Window;
use crate::report::{
    GaugeStats, Health, ModelReport, Report, SloReport, SloStatus, SloValues, TargetReport, WindowReport,
};
use crate::slo::{Bounded, Clause};

/// Target `a` at `t_ms` serving `rate` requests/s, attainment falling past 5.
fn report(t_ms: i64, rate: f64) -> Report {
    let a = if rate <= 5.0 { 0.995 } else { 0.5 };
    let mut w = WindowReport::empty(Window::from_secs(60));
    w.coverage = 1.0;
    w.requests_per_second = Some(rate);
    w.running = Some(GaugeStats { first: 10.0, last: 10.0, mean: 10.0, max: 10.0 });
    w.waiting = Some(GaugeStats { first: 0.0, last: 0.0, mean: 0.0, max: 0.0 });
    w.mean_prompt_tokens = Some(400.0);
    w.mean_output_tokens = Some(120.0);
    let joint = Bounded { lower: a, estimate: a, upper: a };
    w.slos = vec![SloReport {
        slo: "chat".into(),
        objective: 0.99,
        status: SloStatus::Evaluated(SloValues {
            attainment: BTreeMap::from([(Clause::Joint, joint)]),
            burn_rate: joint,
            goodput_requests_per_second: None,
            goodput_tokens_per_second: None,
            requests: rate * 60.0,
            failed: 0.0,
        }),
    }];
    Report {
        t_ms,
        targets: vec![TargetReport {
            target: "a".into(),
            engine: None,
            health: Health { up: true, process_start_s: Some(1.0), ..Health::default() },
            models: vec![ModelReport { model: "m".into(), windows: vec![w] }].into(),
        }],
        ..Report::default()
    }
}

#[test]
fn the_capacity_history_survives_a_restart_under_the_same_slos() {
    let w = world(CONFIG);
    {
        let mut book = w.sources.capacity.lock().unwrap();
        for k in 0..240 {
            book.feed(&report(T0 - 3_600_000 + k * 15_000, 1.0 + 8.0 * (k % 40) as f64 / 40.0));
        }
    }
    let bytes = snapshot(&w);
    // As a snapshot holds it: what is not saved (scratch space, work counted) may differ.
    let saved = |w: &super::World| postcard::to_allocvec(&w.sources.capacity.lock().unwrap().saved("a")).unwrap();
    let (fresh, o) = restore_into(CONFIG, &bytes);
    assert!(o.restored.contains(&RestorePart::Capacity), "{:?}", o.lost);
    assert_eq!(saved(&fresh), saved(&w));
    // Judged against another objective, the history does not come back.
    let (other, o) = restore_into(&CONFIG.replace("objective: 0.99", "objective: 0.95"), &bytes);
    assert!(!other.sources.capacity.lock().unwrap().holds("a"));
    assert!(o.lost.iter().any(|l| l.part == RestorePart::Capacity), "{:?}", o.lost);
}

#[test]
fn a_capacity_part_of_the_earlier_format_is_dropped_with_its_reason() {
    let w = world(CONFIG);
    let target = w.config.targets.iter().find(|t| t.name == "a").unwrap();
    // A section as the format before wrote it: the part's tag (capacity is the sixth),
    // then the number of series and series of a shape this build does not know.
    let body = postcard::to_allocvec(&("a", identity(target), 5u32, 1u64, [7u8; 32])).unwrap();
    let mut bytes = format::header(T0);
    bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    bytes.extend_from_slice(&body);
    let (fresh, o) = restore_into(CONFIG, &bytes);
    assert!(!fresh.sources.capacity.lock().unwrap().holds("a"));
    let lost = o.lost.iter().find(|l| l.part == RestorePart::Capacity).expect("the capacity part is lost");
    assert_eq!(lost.why, Why::OtherFormat { format: 1 }, "{:?}", o.lost);
}
