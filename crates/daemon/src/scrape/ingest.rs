//! A scrape body → a canonical snapshot. Pure: no I/O, no clock.

use crate::adapt::{EngineHint, adapt};
use crate::canonical::Snapshot;
use crate::parse::{Limits, parse};

use super::ScrapeError;

/// Parses `body` within `limits` and maps it onto the canonical model.
pub fn ingest(body: &[u8], limits: &Limits, hint: EngineHint, default_model: &str) -> Result<Snapshot, ScrapeError> {
    let exposition =
        parse(body, limits).map_err(|e| ScrapeError::new(e.reason(), format!("cannot parse the exposition: {e}")))?;
    adapt(&exposition, hint, default_model)
        .map_err(|e| ScrapeError::new("adapt_error", format!("no usable engine metrics: {e}")))
}
