//! Why a scrape failed: a machine-readable reason (a label value) and a message for humans.

use std::fmt;

/// A failed scrape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrapeError {
    reason: &'static str,
    message: String,
}

impl ScrapeError {
    /// Reasons used as `llm_slo_scrape_errors_total{reason}`; docs/config.md says what each means.
    pub const REASONS: &'static [&'static str] = crate::report::SCRAPE_ERROR_REASONS;

    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        debug_assert!(Self::REASONS.contains(&reason), "undocumented reason {reason}");
        ScrapeError { reason, message: message.into() }
    }

    pub fn reason(&self) -> &'static str {
        self.reason
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// Classifies a failed request to `url` by what went wrong on the wire. The scrape's
    /// deadline is kept outside the client ([`super::Fetcher::fetch`]), so no request error
    /// is a timeout.
    pub(crate) fn from_client(e: &hyper_util::client::legacy::Error, url: &url::Url) -> Self {
        let reason = if e.is_connect() { "connect" } else { "read_error" };
        // The client's Display is one word ("client error (Connect)"); the chain says why.
        // The message reaches logs and /api/v1/report, so the URL is redacted.
        ScrapeError::new(
            reason,
            format!("request to {} failed: {}", crate::redact::url(url), crate::redact::error_chain(e)),
        )
    }
}

impl fmt::Display for ScrapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.reason)
    }
}

impl std::error::Error for ScrapeError {}
