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
    pub(super) fn from_request(e: &super::client::RequestError, url: &url::Url) -> Self {
        use super::client::RequestError;
        let (reason, why) = match e {
            RequestError::Connect(e) => ("connect", crate::redact::error_chain(e.as_ref())),
            RequestError::Http(e) => ("read_error", crate::redact::error_chain(e)),
            RequestError::NoOrigin => ("connect", "the URL names no host".to_string()),
        };
        // The message reaches logs and /api/v1/report, so the URL is redacted.
        ScrapeError::new(reason, format!("request to {} failed: {why}", crate::redact::url(url)))
    }
}

impl fmt::Display for ScrapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.reason)
    }
}

impl std::error::Error for ScrapeError {}
