//! Hugging Face TGI (3.x) metrics as metrics-exporter-prometheus prints them
//! (docs/engines.md#tgi): no labels identifying model or engine, counters without
//! `_total`, per-request histograms for successful requests only, and no TTFT at all.
//! Several simulated engines appear as one TGI router.

use super::config::SimConfig;
use super::engine::Engine;
use super::event::{Event, FinishReason};
use super::expo::{Labels, Style, Writer};
use super::hist::{self, Histogram};

pub struct TgiMetrics {
    none: Labels,
    count: u64,
    success: u64,
    duration: Histogram,
    validation: Histogram,
    queue: Histogram,
    inference: Histogram,
    mean_tpt: Histogram,
    generated: Histogram,
    input_length: Histogram,
    max_new_tokens: Histogram,
    max_total_tokens: u64,
}

impl TgiMetrics {
    pub fn new(c: &SimConfig) -> TgiMetrics {
        let d = hist::tgi_duration_buckets();
        let max_input = c.engine.max_model_len - 1;
        TgiMetrics {
            none: Vec::new(),
            count: 0,
            success: 0,
            duration: Histogram::new(&d),
            validation: Histogram::new(&d),
            queue: Histogram::new(&d),
            inference: Histogram::new(&d),
            mean_tpt: Histogram::new(&d),
            generated: Histogram::new(&hist::tgi_linear_buckets(c.engine.max_model_len)),
            input_length: Histogram::new(&hist::tgi_linear_buckets(max_input)),
            max_new_tokens: Histogram::new(&hist::tgi_linear_buckets(c.engine.max_model_len)),
            max_total_tokens: u64::from(c.engine.num_gpu_blocks - 1)
                * u64::from(c.engine.block_size)
                * u64::from(c.engines),
        }
    }

    pub fn observe(&mut self, ev: &Event) {
        match ev {
            Event::Arrived { prompt, max_tokens, validation, .. } => {
                self.count += 1;
                self.input_length.observe(f64::from(*prompt));
                self.max_new_tokens.observe(f64::from(*max_tokens));
                self.validation.observe(*validation);
            }
            Event::Finished(f) if f.reason != FinishReason::Abort && f.output > 0 => {
                self.success += 1;
                let inference = f.prefill + f.decode;
                self.duration.observe(f.e2e);
                self.queue.observe(f.queue);
                self.inference.observe(inference);
                self.mean_tpt.observe(inference / f64::from(f.output));
                self.generated.observe(f64::from(f.output));
            }
            _ => {}
        }
    }

    pub fn render(&self, engines: &[Engine]) -> String {
        let mut w = Writer::new(Style::Rust);
        let n = &self.none;
        w.counter("tgi_request_success", Some("Number of successful requests"), [(n, self.success)], 0.0);
        w.counter("tgi_request_count", Some("Total number of requests"), [(n, self.count)], 0.0);
        let sum = |f: &dyn Fn(&Engine) -> f64| engines.iter().map(f).sum::<f64>();
        w.gauge("tgi_queue_size", Some("Current queue size"), [(n, sum(&|e| e.num_waiting() as f64))]);
        w.gauge(
            "tgi_batch_current_max_tokens",
            Some("Maximum tokens for the current batch"),
            [(n, sum(&|e| e.running_max_tokens() as f64))],
        );
        w.gauge("tgi_batch_current_size", Some("Current batch size"), [(n, sum(&|e| e.num_running() as f64))]);
        w.gauge(
            "tgi_batch_max_total_tokens",
            // Set once at warm-up and never described, so TGI prints no HELP for it.
            None,
            [(n, self.max_total_tokens as f64)],
        );
        let hists: [(&str, &str, &Histogram); 8] = [
            ("tgi_request_input_length", "Input token length per request", &self.input_length),
            ("tgi_request_max_new_tokens", "Maximum new tokens per request", &self.max_new_tokens),
            ("tgi_request_inference_duration", "Request inference duration", &self.inference),
            ("tgi_request_duration", "Request duration", &self.duration),
            ("tgi_request_validation_duration", "Request validation duration", &self.validation),
            ("tgi_request_queue_duration", "Request queue duration", &self.queue),
            ("tgi_request_mean_time_per_token_duration", "Mean time per token per request", &self.mean_tpt),
            ("tgi_request_generated_tokens", "Generated tokens per request", &self.generated),
        ];
        for (name, help, h) in hists {
            w.histogram(name, Some(help), [(n, h)], 0.0);
        }
        w.out
    }
}
