//! The simulated engine's metrics registry, in the format it was asked to speak.

use super::config::{Format, SimConfig};
use super::engine::Engine;
use super::event::Event;
use super::sglang::SglangMetrics;
use super::tgi::TgiMetrics;
use super::vllm::VllmMetrics;

pub enum Metrics {
    Vllm(Box<VllmMetrics>),
    Sglang(Box<SglangMetrics>),
    Tgi(Box<TgiMetrics>),
}

impl Metrics {
    pub fn new(c: &SimConfig) -> Metrics {
        match c.format {
            Format::Vllm => Metrics::Vllm(Box::new(VllmMetrics::new(c))),
            Format::Sglang => Metrics::Sglang(Box::new(SglangMetrics::new(c))),
            Format::Tgi => Metrics::Tgi(Box::new(TgiMetrics::new(c))),
        }
    }

    pub fn observe(&mut self, ev: &Event) {
        match self {
            Metrics::Vllm(m) => m.observe(ev),
            Metrics::Sglang(m) => m.observe(ev),
            Metrics::Tgi(m) => m.observe(ev),
        }
    }

    /// One scrape body (text format 0.0.4) at virtual time `now`.
    pub fn render(&self, engines: &[Engine], now: f64) -> String {
        match self {
            Metrics::Vllm(m) => m.render(engines, now),
            Metrics::Sglang(m) => m.render(engines),
            Metrics::Tgi(m) => m.render(engines),
        }
    }
}
