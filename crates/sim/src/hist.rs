//! A cumulative histogram as prometheus_client keeps one, and the bucket lists the real
//! engines use (docs/engines.md#vllm-buckets, #tgi, #sglang). These are the *simulated
//! engine's* buckets; goodput itself never hard-codes them ("buckets are data",
//! docs/engines.md#rules-every-adapter-follows).

/// vLLM V1 `REQ` request-phase buckets.
pub const VLLM_REQ: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
];
/// vLLM V1 TTFT buckets.
pub const VLLM_TTFT: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
];
/// vLLM V1 ITL buckets (also per-request TPOT).
pub const VLLM_ITL: &[f64] =
    &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
/// vLLM `iteration_tokens_total` buckets (≥ 0.9).
pub const VLLM_ITER: &[f64] =
    &[1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0];
/// vLLM `request_params_n` buckets.
pub const VLLM_N: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0];

pub const SGLANG_TTFT: &[f64] =
    &[0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0];
pub const SGLANG_ITL: &[f64] = &[
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400,
    0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
];
pub const SGLANG_E2E: &[f64] = &[
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0, 600.0, 1200.0,
    1800.0, 2400.0,
];
pub const SGLANG_QUEUE: &[f64] = &[
    0.0, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0,
    200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0, 900.0, 1000.0, 1200.0, 1400.0, 1600.0, 1800.0, 2000.0, 2500.0,
    3000.0,
];

/// vLLM's `build_1_2_5_buckets(max_value)`: 1, 2, 5, 10, 20, 50, … up to `max_value`.
pub fn buckets_1_2_5(max_value: u32) -> Vec<f64> {
    let mut out = Vec::new();
    let mut exp = 1u64;
    'outer: loop {
        for m in [1u64, 2, 5] {
            let v = m * exp;
            if v > u64::from(max_value) {
                break 'outer;
            }
            out.push(v as f64);
        }
        exp *= 10;
    }
    out
}

/// TGI: every `*duration` histogram, 35 buckets growing ×1.5 from 0.0001.
pub fn tgi_duration_buckets() -> Vec<f64> {
    let mut v = 0.0001f64;
    (0..35)
        .map(|_| {
            v *= 1.5;
            v
        })
        .collect()
}

/// TGI token histograms: `(max/100)·k` for k = 1..=100 (integer division, as in the router).
pub fn tgi_linear_buckets(max: u32) -> Vec<f64> {
    let step = f64::from((max / 100).max(1));
    (1..=100).map(|k| step * f64::from(k)).collect()
}

/// Per-bucket (non-cumulative) counts; the last slot is `+Inf`.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    bounds: Vec<f64>,
    counts: Vec<u64>,
    pub sum: f64,
}

impl Histogram {
    pub fn new(bounds: &[f64]) -> Histogram {
        Histogram { bounds: bounds.to_vec(), counts: vec![0; bounds.len() + 1], sum: 0.0 }
    }

    /// Observes `v` (`v <= le` goes in bucket `le`, as prometheus_client does).
    pub fn observe(&mut self, v: f64) {
        self.observe_n(v, 1, v);
    }

    /// Adds `n` observations of value `v` and `sum_add` to the sum (SGLang's per-token ITL).
    pub fn observe_n(&mut self, v: f64, n: u64, sum_add: f64) {
        let i = self.bounds.iter().position(|b| v <= *b).unwrap_or(self.bounds.len());
        self.counts[i] += n;
        self.sum += sum_add;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(le, cumulative count)` pairs, ending with `+Inf`.
    pub fn cumulative(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        let mut acc = 0;
        self.bounds.iter().copied().chain(std::iter::once(f64::INFINITY)).zip(&self.counts).map(move |(b, c)| {
            acc += c;
            (b, acc)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_two_five_matches_vllm() {
        // The real 0.13 scrape with max_model_len 40960 ends at 20000.
        let b = buckets_1_2_5(40960);
        assert_eq!(b.first(), Some(&1.0));
        assert_eq!(b.last(), Some(&20000.0));
        assert_eq!(b.len(), 14);
    }

    #[test]
    fn le_is_inclusive() {
        let mut h = Histogram::new(&[0.5, 1.0]);
        for v in [0.5, 0.6, 1.0, 3.0] {
            h.observe(v);
        }
        let c: Vec<_> = h.cumulative().collect();
        assert_eq!(c, vec![(0.5, 1), (1.0, 3), (f64::INFINITY, 4)]);
        assert_eq!(tgi_duration_buckets()[0], 0.0001 * 1.5);
    }
}
