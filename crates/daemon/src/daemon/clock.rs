//! The daemon's notion of "now", injected so that tests and replay can drive time, and the
//! guard that keeps it moving forward when the wall clock steps ([`Steady`],
//! docs/limits.md#clock-steps).
//!
//! Scrape timestamps, evaluation instants and the windows between them all come from one
//! clock. Were it the raw wall clock, a step back of an hour would put every stored scrape
//! an hour in the future of each evaluation, and every window would look empty until the
//! wall clock caught up. [`daemon::start`](super::start) therefore wraps the clock it is
//! given in a [`Steady`], which compares each reading with the monotonic clock:
//!
//! - a step **back** of more than [`STEP`] is bridged: time goes on from the monotonic
//!   clock, ahead of the wall clock by an offset (`llm_slo_clock_offset_seconds`), so
//!   windows keep their data and timestamps keep increasing; a smaller step back holds time
//!   still until the wall clock passes the last instant given out;
//! - a step **forward** first takes back that offset (a correction of an earlier step back
//!   runs on without a jump); what is left is followed, as after a suspend, when the time
//!   really passed: the windows then hold no data for the skipped time.
//!
//! Each step of at least [`STEP`] counts in `llm_slo_clock_steps_total{direction}` and is
//! logged, at most once a minute per direction.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::duration::format_duration;
use goodput_core::export::{Collector, Emit, Family, LabelValue, Labels, NoLabels, Unit};

/// Unix milliseconds, as scrape timestamps and report instants use them.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> i64;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
    }
}

/// The smallest wall-clock step counted and logged: NTP slews smaller differences, and a
/// step back under it only holds time still for as long.
pub const STEP: Duration = Duration::from_secs(1);

/// How often a step of one direction is logged at most; the rest are counted.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Which way the wall clock stepped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Backward,
    Forward,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Backward => "backward",
            Direction::Forward => "forward",
        }
    }
}

/// A step [`Bridge::observe`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stepped {
    pub direction: Direction,
    /// How far the wall clock moved against the monotonic clock, in ms (positive).
    pub by_ms: i64,
    /// The offset of the daemon's time over the wall clock after the step, in ms.
    pub offset_ms: i64,
}

/// The step rule, pure: fed the wall and monotonic readings, it gives the daemon's time.
#[derive(Debug, Default, Clone)]
pub struct Bridge {
    /// (wall ms, monotonic ms, time given out) at the previous reading.
    last: Option<(i64, i64, i64)>,
    /// How far the daemon's time is ahead of the wall clock: the sum of the steps back
    /// bridged, less the steps forward that took them back. Never negative.
    offset_ms: i64,
}

impl Bridge {
    /// The daemon's time for a wall reading `wall_ms` taken at monotonic `mono_ms`, and the
    /// step found since the previous reading, if any.
    pub fn observe(&mut self, wall_ms: i64, mono_ms: i64) -> (i64, Option<Stepped>) {
        let step = STEP.as_millis() as i64;
        let Some((last_wall, last_mono, last_out)) = self.last else {
            self.last = Some((wall_ms, mono_ms, wall_ms));
            return (wall_ms, None);
        };
        let (wall_delta, mono_delta) = (wall_ms - last_wall, (mono_ms - last_mono).max(0));
        let mut stepped = None;
        if wall_delta < -step {
            // Back: go on from the last instant by the monotonic clock's advance.
            self.offset_ms = last_out + mono_delta - wall_ms;
            let by = mono_delta - wall_delta;
            stepped = Some(Stepped { direction: Direction::Backward, by_ms: by, offset_ms: self.offset_ms });
        } else if wall_delta - mono_delta > step {
            let by = wall_delta - mono_delta;
            // What a correction leaves under the step size is the two clocks' millisecond
            // rounding, not time that passed: the offset is taken back whole.
            let left = self.offset_ms - by;
            self.offset_ms = if left < step { 0 } else { left };
            stepped = Some(Stepped { direction: Direction::Forward, by_ms: by, offset_ms: self.offset_ms });
        }
        // Never back, whatever the wall clock does under the step size.
        let out = (wall_ms + self.offset_ms).max(last_out);
        self.last = Some((wall_ms, mono_ms, out));
        (out, stepped)
    }

    pub fn offset_ms(&self) -> i64 {
        self.offset_ms
    }
}

/// The clock-step families on /metrics (docs/metrics.md#target-health-and-the-daemon).
pub const STEPS: &str = "llm_slo_clock_steps_total";
pub const OFFSET: &str = "llm_slo_clock_offset_seconds";

goodput_core::label_set! {
    pub StepDirection = [direction: Direction];
}

/// Every family, in output order.
pub const FAMILIES: &[Family] = &[
    Family::counter::<StepDirection>(
        STEPS,
        Unit::Count,
        "Steps of the wall clock of at least a second against the monotonic clock, by direction: a step back is bridged, a step forward followed.",
    ),
    Family::gauge::<NoLabels>(
        OFFSET,
        Unit::Seconds,
        "How far goodput's time is ahead of the wall clock, bridging steps back; 0 while they agree.",
    ),
];

/// The steps seen, shared by the clock and the /metrics handler.
#[derive(Debug, Default)]
pub struct ClockStats {
    backward: AtomicU64,
    forward: AtomicU64,
    offset_ms: AtomicI64,
}

impl ClockStats {
    pub fn steps(&self, direction: Direction) -> u64 {
        match direction {
            Direction::Backward => self.backward.load(Ordering::Relaxed),
            Direction::Forward => self.forward.load(Ordering::Relaxed),
        }
    }

    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }
}

/// The steps seen, read at each GET of /metrics.
impl Collector for ClockStats {
    fn families(&self) -> &'static [Family] {
        FAMILIES
    }

    fn collect(&self, out: &mut dyn Emit) {
        for d in Direction::ALL {
            out.sample(STEPS, Labels::new(&[("direction", d.as_str())], &[]), self.steps(*d) as f64);
        }
        out.sample(OFFSET, Labels::new(&[], &[]), self.offset_ms() as f64 / 1000.0);
    }
}

impl LabelValue for Direction {
    const ALL: &'static [Direction] = &[Direction::Backward, Direction::Forward];
    fn as_str(self) -> &'static str {
        Direction::as_str(self)
    }
}

/// A clock read through a [`Bridge`] against [`Instant`]: what the daemon runs on.
pub struct Steady {
    wall: std::sync::Arc<dyn Clock>,
    origin: Instant,
    state: Mutex<SteadyState>,
    stats: std::sync::Arc<ClockStats>,
}

struct SteadyState {
    bridge: Bridge,
    /// Per direction: when a step was last logged, and the steps since that were not.
    logged: [(Option<Instant>, u64); 2],
}

impl Steady {
    /// `wall` read through the step guard; `stats` counts its steps.
    pub fn new(wall: std::sync::Arc<dyn Clock>, stats: std::sync::Arc<ClockStats>) -> Steady {
        Steady {
            wall,
            origin: Instant::now(),
            state: Mutex::new(SteadyState { bridge: Bridge::default(), logged: [(None, 0); 2] }),
            stats,
        }
    }
}

impl Clock for Steady {
    fn now_ms(&self) -> i64 {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // Both read under the lock, so that readings reach the bridge in the order taken.
        let wall = self.wall.now_ms();
        let now = Instant::now();
        let mono = now.duration_since(self.origin).as_millis() as i64;
        let (out, stepped) = st.bridge.observe(wall, mono);
        if let Some(s) = stepped {
            self.stats.offset_ms.store(s.offset_ms, Ordering::Relaxed);
            let (counter, slot) = match s.direction {
                Direction::Backward => (&self.stats.backward, 0),
                Direction::Forward => (&self.stats.forward, 1),
            };
            counter.fetch_add(1, Ordering::Relaxed);
            let (last, quiet) = &mut st.logged[slot];
            if last.is_none_or(|t| now.duration_since(t) >= LOG_EVERY) {
                log_step(s, *quiet);
                *last = Some(now);
                *quiet = 0;
            } else {
                *quiet += 1;
            }
        }
        out
    }
}

fn log_step(s: Stepped, unlogged: u64) {
    let by = format_duration(Duration::from_millis(s.by_ms.unsigned_abs()));
    let ahead = format_duration(Duration::from_millis(s.offset_ms.unsigned_abs()));
    let more = if unlogged > 0 {
        format!(" ({unlogged} more steps this way since the last such line)")
    } else {
        String::new()
    };
    match s.direction {
        Direction::Backward => tracing::warn!(
            "the wall clock stepped back by {by}{more}; goodput's time goes on from the monotonic clock, now {ahead} ahead of the wall clock, so windows keep their data; it stays ahead until the wall clock steps forward again or goodput restarts (llm_slo_clock_offset_seconds, docs/limits.md#clock-steps)"
        ),
        Direction::Forward if s.offset_ms > 0 => tracing::warn!(
            "the wall clock stepped forward by {by}{more}, taking back part of an earlier step back; goodput's time is still {ahead} ahead of it (docs/limits.md#clock-steps)"
        ),
        Direction::Forward => tracing::warn!(
            "the wall clock stepped forward by {by}{more}; goodput follows it, and its windows hold no data for the time skipped (docs/limits.md#clock-steps)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_000;
    const HOUR: i64 = 3_600_000;

    #[test]
    fn a_step_back_is_bridged_and_a_step_forward_takes_it_back() {
        let mut b = Bridge::default();
        assert_eq!(b.observe(T0, 0), (T0, None));
        assert_eq!(b.observe(T0 + 5_000, 5_000), (T0 + 5_000, None));
        // The wall clock goes back an hour between two readings 5 s apart.
        let (t, s) = b.observe(T0 + 10_000 - HOUR, 10_000);
        assert_eq!(t, T0 + 10_000, "time goes on from the monotonic clock");
        let s = s.unwrap();
        assert_eq!((s.direction, s.by_ms, s.offset_ms), (Direction::Backward, HOUR, HOUR));
        // It keeps running with the wall clock, an hour ahead of it.
        assert_eq!(b.observe(T0 + 15_000 - HOUR, 15_000), (T0 + 15_000, None));
        // The wall clock is corrected: the offset is taken back, time does not jump.
        let (t, s) = b.observe(T0 + 20_000, 20_000);
        assert_eq!(t, T0 + 20_000);
        assert_eq!(s.map(|s| (s.direction, s.offset_ms)), Some((Direction::Forward, 0)));
        assert_eq!(b.offset_ms(), 0);
    }

    /// The wall and monotonic readings are rounded to milliseconds apart from each other, so
    /// a correction of an hour's step back measures an hour give or take a millisecond.
    #[test]
    fn a_correction_within_rounding_takes_the_offset_back_whole() {
        let mut b = Bridge::default();
        b.observe(T0, 0);
        b.observe(T0 + 5_000 - HOUR, 5_001);
        assert_eq!(b.offset_ms(), HOUR + 1);
        // The correction measures an hour: a millisecond of the offset is rounding.
        let (_, s) = b.observe(T0 + 10_000, 10_001);
        assert_eq!(s.map(|s| (s.direction, s.by_ms, s.offset_ms)), Some((Direction::Forward, HOUR, 0)));
        assert_eq!(b.offset_ms(), 0);
        // A correction of part of the step leaves the rest.
        b.observe(T0 + 15_000 - HOUR, 15_001);
        b.observe(T0 + 20_000 - HOUR / 2, 20_001);
        assert_eq!(b.offset_ms(), HOUR / 2);
    }

    #[test]
    fn a_step_forward_without_an_offset_is_followed() {
        let mut b = Bridge::default();
        b.observe(T0, 0);
        let (t, s) = b.observe(T0 + HOUR + 1_000, 1_000);
        assert_eq!(t, T0 + HOUR + 1_000);
        assert_eq!(s.map(|s| (s.direction, s.by_ms)), Some((Direction::Forward, HOUR)));
        assert_eq!(b.offset_ms(), 0);
    }

    #[test]
    fn small_steps_and_a_stopped_clock_are_not_steps_and_time_never_goes_back() {
        let mut b = Bridge::default();
        b.observe(T0, 0);
        // 300 ms back: held, not bridged.
        assert_eq!(b.observe(T0 - 300, 100), (T0, None));
        assert_eq!(b.observe(T0 + 200, 600), (T0 + 200, None));
        // A wall clock that stands still (a test's frozen clock) is not a step.
        assert_eq!(b.observe(T0 + 200, 60_000), (T0 + 200, None));
        assert_eq!(b.offset_ms(), 0);
    }

    #[test]
    fn the_steady_clock_counts_steps_and_exports_them() {
        struct Wall(AtomicI64);
        impl Clock for Wall {
            fn now_ms(&self) -> i64 {
                self.0.load(Ordering::SeqCst)
            }
        }
        let wall = std::sync::Arc::new(Wall(AtomicI64::new(T0)));
        let stats = std::sync::Arc::new(ClockStats::default());
        let c = Steady::new(wall.clone(), stats.clone());
        let t1 = c.now_ms();
        wall.0.store(T0 - HOUR, Ordering::SeqCst);
        let t2 = c.now_ms();
        assert!(t2 >= t1, "time went back: {t1} → {t2}");
        assert_eq!((stats.steps(Direction::Backward), stats.steps(Direction::Forward)), (1, 0));
        assert!(stats.offset_ms() >= HOUR);
        let mut out = goodput_core::export::Collect::new(|_| None);
        stats.collect(&mut out);
        let out = out.finish();
        assert_eq!((out[0].name, out[0].labels[0].1.as_str(), out[0].value), (STEPS, "backward", 1.0), "{out:?}");
        assert!(out.iter().any(|s| s.name == OFFSET && s.value >= HOUR as f64 / 1000.0), "{out:?}");
    }
}
