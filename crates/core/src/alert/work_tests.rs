//! The alert state's work per tick counted, not timed: alerts that resolve leave the state,
//! so a tick after a day of flapping targets takes the work of a tick after a minute.

use std::time::Duration;

use super::*;

fn input(target: &str, up: bool) -> AlertInput {
    AlertInput {
        target: target.into(),
        model: String::new(),
        up,
        waiting_now: None,
        slos: Vec::new(),
        windows: Vec::new(),
        capacity: Vec::new(),
    }
}

/// Twenty targets at 5 s ticks: one always down, the others down one tick in 40 each (at
/// their own phase), so alerts start, fire and resolve all day.
fn inputs(k: i64) -> Vec<AlertInput> {
    (0..20).map(|t| input(&format!("t{t}"), t != 0 && (k + t * 7) % 40 != 0)).collect()
}

/// The engine's work and its active alerts over a minute of ticks after `history_ms`.
fn a_minute_after(history_ms: i64) -> (u64, usize) {
    let mut e = AlertEngine::new(AlertingConfig::default().rule_set(), None, Duration::from_secs(300));
    let ticks = history_ms / 5_000;
    for k in 0..ticks {
        e.evaluate(k * 5_000, &inputs(k));
    }
    let before = e.work();
    let mut most = 0;
    for k in ticks..ticks + 12 {
        e.evaluate(k * 5_000, &inputs(k));
        most = most.max(e.active().count());
    }
    (e.work() - before, most)
}

#[test]
fn a_tick_after_a_day_of_flapping_costs_what_a_tick_after_a_minute_does() {
    let (minute, active_minute) = a_minute_after(60_000);
    let (day, active_day) = a_minute_after(86_400_000);
    assert!(minute >= 12 * 20, "{minute}: not counting");
    assert!(day as f64 <= 1.25 * minute as f64, "a day {day}, a minute {minute}");
    // The one target down all day fires; the flapping ones come and go.
    assert!((1..=20).contains(&active_day), "{active_day} active");
    assert!(active_day <= active_minute + 2, "{active_day} against {active_minute}");
    eprintln!("alert work over a minute of ticks: after a minute {minute}, after a day {day}");
}
