//! The status page at `/` (docs/status-page.md): one HTML page rendered here from the latest
//! [`Report`], the config's SLO thresholds and KV bands, and a short [`History`] of recent
//! evaluations for the charts. No JavaScript (a `<meta>` refresh reloads it every
//! evaluation), no template engine, nothing loaded from outside the daemon: the stylesheet
//! is served at `/status.css` and a strict `Content-Security-Policy` forbids anything else.

mod capacity;
mod history;
mod html;
mod render;
#[cfg(any(test, feature = "test-hooks"))]
pub mod sample;
mod svg;

use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::config::Config;
use crate::duration::Window;
use crate::evaluate::KvThresholds;
use crate::report::Report;
use crate::slo::Slo;

pub use history::{CHART_QUANTILE, DEFAULT_RING_LEN, History, Series};
pub use render::render;
pub use svg::attainment_cell;

/// The page's policy: its own stylesheet, inline SVG, and nothing else, from anywhere.
/// Inline SVG needs no source; `<meta http-equiv="refresh">` is not a fetch.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The stylesheet, served at `/status.css`.
pub const STYLESHEET: &str = include_str!("status.css");

/// What the page needs from the config, which the report does not carry.
#[derive(Debug, Clone)]
pub struct PageFacts {
    /// Every configured SLO, for the thresholds drawn against the latency charts.
    pub slos: Vec<Slo>,
    pub kv: KvThresholds,
    /// The configured windows: the SLO table shows these, not the longer ones the alert
    /// rules add to the report. Empty shows every window of the report.
    pub windows: Vec<Window>,
    /// How often a new report is published: the page reloads at this pace.
    pub refresh: Duration,
}

impl Default for PageFacts {
    fn default() -> Self {
        PageFacts {
            slos: Vec::new(),
            kv: KvThresholds::default(),
            windows: Vec::new(),
            refresh: Duration::from_secs(5),
        }
    }
}

impl PageFacts {
    pub fn from_config(config: &Config) -> PageFacts {
        PageFacts {
            slos: config.slos.clone(),
            kv: config.kv_cache,
            windows: config.windows.clone(),
            refresh: config.evaluation_interval,
        }
    }

    /// Seconds between reloads: the evaluation interval, not under 2 s so that a fast
    /// evaluation does not turn an open tab into a load generator.
    pub fn refresh_seconds(&self) -> u64 {
        self.refresh.as_secs_f64().ceil().max(2.0) as u64
    }
}

/// The page's state in the daemon: the config facts and the history, which
/// [`StatusPage::record`] extends with every published report.
#[derive(Debug)]
pub struct StatusPage {
    pub facts: PageFacts,
    history: RwLock<History>,
}

impl Default for StatusPage {
    fn default() -> Self {
        StatusPage::new(PageFacts::default(), DEFAULT_RING_LEN)
    }
}

impl StatusPage {
    pub fn new(facts: PageFacts, ring_len: usize) -> StatusPage {
        StatusPage { facts, history: RwLock::new(History::new(ring_len)) }
    }

    /// Appends `report` to the history (one point per target and model).
    pub fn record(&self, report: &Report) {
        self.history.write().unwrap_or_else(PoisonError::into_inner).record(report);
    }

    /// The page for `report`, drawn with the history as it is now.
    pub fn html(&self, report: &Report) -> String {
        let history = self.history.read().unwrap_or_else(PoisonError::into_inner);
        render(report, &history, &self.facts)
    }

    /// The HTTP response for `/`, with the security headers.
    pub fn response(&self, report: &Report) -> Response {
        let mut r = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], self.html(report)).into_response();
        secure(&mut r);
        r
    }
}

/// The response for `/status.css`.
pub fn stylesheet() -> Response {
    let mut r = ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLESHEET).into_response();
    secure(&mut r);
    r
}

fn secure(r: &mut Response) {
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // A runbook link must not tell another site where the daemon is.
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

#[cfg(test)]
mod tests;
