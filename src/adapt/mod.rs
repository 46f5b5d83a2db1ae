//! Engine adapters: one parsed exposition → one canonical [`Snapshot`](crate::canonical::Snapshot).
//!
//! INTERFACE STUB: the implementation lands from the `adapt` work; the signature is fixed.

use crate::canonical::{Engine, Snapshot};
use crate::parse::Exposition;

/// Which engine a target runs: named in config, or detected from the scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineHint {
    #[default]
    Auto,
    Is(Engine),
}

/// Why a parsed scrape could not be mapped (no known engine's metrics in it, …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AdaptError(pub String);

/// Maps one parsed exposition onto the canonical model. `default_model` names the model
/// for engines whose metrics carry no model label (TGI).
pub fn adapt(exposition: &Exposition<'_>, hint: EngineHint, default_model: &str) -> Result<Snapshot, AdaptError> {
    let _ = (exposition, hint, default_model);
    Err(AdaptError("adapters are not built yet".into()))
}
