//! The status page at `/` (docs/status-page.md): one HTML page rendered here from the latest
//! [`Report`], the config's SLO thresholds and KV bands, and a short [`History`] of recent
//! evaluations for the charts. No JavaScript (a `<meta>` refresh reloads it every
//! evaluation), no template engine, nothing loaded from outside the daemon: the stylesheet
//! is served at `/status.css` and a strict `Content-Security-Policy` forbids anything else.

mod alerts;
mod budget;
mod capacity;
mod facts;
mod history;
pub(crate) mod html;
mod render;
#[cfg(any(test, feature = "test-hooks"))]
pub mod sample;
mod svg;

use std::sync::{PoisonError, RwLock};

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::report::Report;

pub use facts::PageFacts;
pub use history::{CHART_QUANTILE, DEFAULT_RING_LEN, History, Series};
pub use render::render;
pub use svg::attainment_cell;

/// The page's policy: its own stylesheet, inline SVG, and nothing else, from anywhere.
/// Inline SVG needs no source; `<meta http-equiv="refresh">` is not a fetch.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The stylesheet, served at `/status.css`.
pub const STYLESHEET: &str = include_str!("status.css");

/// The page's state in the daemon: the config facts (which a reload replaces,
/// [`StatusPage::set_facts`]) and the history, which [`StatusPage::record`] extends with
/// every published report.
#[derive(Debug)]
pub struct StatusPage {
    facts: RwLock<PageFacts>,
    history: RwLock<History>,
}

impl Default for StatusPage {
    fn default() -> Self {
        StatusPage::new(PageFacts::default(), DEFAULT_RING_LEN)
    }
}

impl StatusPage {
    pub fn new(facts: PageFacts, ring_len: usize) -> StatusPage {
        StatusPage { facts: RwLock::new(facts), history: RwLock::new(History::new(ring_len)) }
    }

    /// The facts of a reloaded config, drawn from the next page on; the history is kept.
    pub fn set_facts(&self, facts: PageFacts) {
        *self.facts.write().unwrap_or_else(PoisonError::into_inner) = facts;
    }

    /// Appends `report` to the history (one point per target and model).
    pub fn record(&self, report: &Report) {
        self.history.write().unwrap_or_else(PoisonError::into_inner).record(report);
    }

    /// The page for `report`, drawn with the history as it is now.
    pub fn html(&self, report: &Report) -> String {
        let history = self.history.read().unwrap_or_else(PoisonError::into_inner);
        let facts = self.facts.read().unwrap_or_else(PoisonError::into_inner);
        render(report, &history, &facts)
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
#[cfg(test)]
mod text_tests;
