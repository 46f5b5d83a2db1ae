//! What a window adds up from its requests: counts by outcome, output tokens, the TTFT sum
//! for its mean, and one [`SloCounts`] per SLO that applies to the series. Every field is a
//! sum, so a window's tally is the same whether it is added record by record or merged from
//! time slots: the counts are exact either way.

use super::compact::Compact;
use super::judge::{Judgement, SloCounts};

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tally {
    /// Requests that finished, whatever their status.
    pub finished: u64,
    /// … of which not [`Status::Ok`](super::Status::Ok).
    pub failed: u64,
    /// Output tokens of every finished request (a counted N is a lower bound).
    pub output_tokens: u64,
    /// Requests whose output token count was counted rather than known, or missing.
    pub inexact_tokens: u64,
    pub ttft_sum: f64,
    pub ttft_count: u64,
    /// In the order of the series' SLOs.
    pub slos: Vec<SloCounts>,
}

impl Tally {
    pub fn new(slos: usize) -> Tally {
        Tally { slos: vec![SloCounts::default(); slos], ..Tally::default() }
    }

    /// Adds one request judged against each of the series' SLOs (`judgements` in their order).
    pub fn add(&mut self, r: &Compact, judgements: &[Judgement]) {
        self.finished += 1;
        self.failed += u64::from(!r.ok());
        self.output_tokens += u64::from(r.output_tokens);
        self.inexact_tokens += u64::from(!r.tokens_exact());
        if let Some(t) = r.ttft() {
            self.ttft_sum += t;
            self.ttft_count += 1;
        }
        for (c, j) in self.slos.iter_mut().zip(judgements) {
            c.add(j, r.output_tokens);
        }
    }

    /// Takes out one request [`Tally::add`] added with the same judgements.
    pub fn remove(&mut self, r: &Compact, judgements: &[Judgement]) {
        self.finished -= 1;
        self.failed -= u64::from(!r.ok());
        self.output_tokens -= u64::from(r.output_tokens);
        self.inexact_tokens -= u64::from(!r.tokens_exact());
        if let Some(t) = r.ttft() {
            self.ttft_count -= 1;
            // Exact zero once empty, whatever rounding the adds and removals left.
            self.ttft_sum = if self.ttft_count == 0 { 0.0 } else { self.ttft_sum - t };
        }
        for (c, j) in self.slos.iter_mut().zip(judgements) {
            c.remove(j, r.output_tokens);
        }
    }

    pub fn merge(&mut self, o: &Tally) {
        self.finished += o.finished;
        self.failed += o.failed;
        self.output_tokens += o.output_tokens;
        self.inexact_tokens += o.inexact_tokens;
        self.ttft_sum += o.ttft_sum;
        self.ttft_count += o.ttft_count;
        if self.slos.len() < o.slos.len() {
            self.slos.resize(o.slos.len(), SloCounts::default());
        }
        for (a, b) in self.slos.iter_mut().zip(&o.slos) {
            a.merge(b);
        }
    }

    /// Takes out a tally [`Tally::merge`] added.
    pub fn subtract(&mut self, o: &Tally) {
        self.finished -= o.finished;
        self.failed -= o.failed;
        self.output_tokens -= o.output_tokens;
        self.inexact_tokens -= o.inexact_tokens;
        self.ttft_count -= o.ttft_count;
        // Exact zero once empty, whatever rounding the merges and subtractions left.
        self.ttft_sum = if self.ttft_count == 0 { 0.0 } else { self.ttft_sum - o.ttft_sum };
        for (a, b) in self.slos.iter_mut().zip(&o.slos) {
            a.subtract(b);
        }
    }

    pub fn mean_ttft(&self) -> Option<f64> {
        (self.ttft_count > 0).then(|| self.ttft_sum / self.ttft_count as f64)
    }

    /// Bytes held beyond the struct itself.
    pub fn heap_bytes(&self) -> usize {
        self.slos.capacity() * std::mem::size_of::<SloCounts>()
    }
}
