//! One evaluation interval of a target and model, and what decides whether it counts in
//! an estimate: the workload signature it is compared with and whether it was draining a
//! backlog (docs/capacity.md#history). Shared by the history, the sums it keeps of its
//! older intervals and the saturation signal, so that each of them imports this file
//! rather than one another.

use std::time::Duration;

/// Older intervals weigh less: half as much per hour, so a knee seen this morning still
/// counts in the afternoon but today's engine outweighs yesterday's.
pub const HALF_LIFE: Duration = Duration::from_secs(3_600);
/// Intervals whose mean prompt and output lengths are within this share of the current
/// ones (the median of the last eight minutes) count as the same workload; capacity in
/// requests/s depends on the mix. Wide, because the mix of *finished* requests moves with
/// load (long requests time out under overload): at 25 % the overloaded intervals were
/// another workload to the calm ones (docs/accuracy.md#capacity).
pub const SIGNATURE_TOLERANCE: f64 = 0.5;
/// Completions this far under arrivals count as lagging (docs/capacity.md#saturation);
/// this far over them, the engine was working off a backlog ([`draining`]).
pub const LAG_SHARE: f64 = 0.10;

/// One SLO over one interval: requests judged, and how many met it. The two ends differ
/// only when attainment is a histogram bracket; weighted by the share of the window that
/// is new since the previous interval, so a request is counted once.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Judged {
    pub total: f32,
    pub good_lower: f32,
    pub good_upper: f32,
    /// From requests (tap or spans) rather than histograms.
    pub exact: bool,
}

impl Judged {
    pub fn add(&mut self, o: Judged) {
        self.total += o.total;
        self.good_lower += o.good_lower;
        self.good_upper += o.good_upper;
    }

    /// Whether it judged any request.
    pub fn judged(&self) -> bool {
        !self.total.is_nan() && self.total > 0.0
    }
}

/// What one evaluation interval saw. Unknown values are NaN.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Interval {
    pub t_ms: i64,
    /// Arrivals per second: completions plus the change in requests in flight.
    pub arrival_rate: f32,
    pub finished_rate: f32,
    /// The lowest arrival rate over the settling span that ends with this interval
    /// (`history::SETTLE_INTERVALS`): the rate the engine had held at least that long.
    pub held_rate: f32,
    /// Requests waiting and running at the interval's last scrape.
    pub waiting: f32,
    pub running: f32,
    /// Highest KV-cache usage in the window (0–1).
    pub kv_usage: f32,
    pub preemptions_per_second: f32,
    pub ttft_p99: f32,
    /// The workload signature: mean prompt and output tokens of finished requests.
    pub mean_prompt_tokens: f32,
    pub mean_output_tokens: f32,
    /// One per SLO, in the order of the book's SLOs for this target and model.
    pub slos: Box<[Judged]>,
}

impl Interval {
    /// An interval at `t_ms` with nothing measured.
    pub fn empty(t_ms: i64) -> Interval {
        Interval {
            t_ms,
            arrival_rate: f32::NAN,
            finished_rate: f32::NAN,
            held_rate: f32::NAN,
            waiting: f32::NAN,
            running: f32::NAN,
            kv_usage: f32::NAN,
            preemptions_per_second: f32::NAN,
            ttft_p99: f32::NAN,
            mean_prompt_tokens: f32::NAN,
            mean_output_tokens: f32::NAN,
            slos: Box::default(),
        }
    }
}

/// The current workload signature: the median prompt and output length of the newest
/// intervals, `None` where none is known (which rules nothing out).
pub type Signature = (Option<f64>, Option<f64>);

/// Whether `x` lies within the signature's tolerance of `now`.
pub fn near(now: Option<f64>, x: f32) -> bool {
    match now {
        Some(now) if now > 0.0 && x.is_finite() => (x as f64 - now).abs() <= SIGNATURE_TOLERANCE * now,
        _ => true,
    }
}

/// Whether an interval of these lengths is of the workload `signature`.
pub fn same_workload(signature: Signature, prompt: f32, output: f32) -> bool {
    near(signature.0, prompt) && near(signature.1, output)
}

/// Whether the engine was working off a backlog: completions more than 10 % above
/// arrivals. The requests that finished then were judged at the load that queued them, not
/// at the low rate that arrives while the queue drains; counted at that rate, they would
/// pull the capacity far down after every peak.
pub fn draining(i: &Interval) -> bool {
    let (a, f) = (i.arrival_rate as f64, i.finished_rate as f64);
    f > a * (1.0 + LAG_SHARE) && f - a > 0.05
}
