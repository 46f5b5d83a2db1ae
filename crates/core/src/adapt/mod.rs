//! Engine adapters: one parsed exposition → one canonical [`Snapshot`].
//!
//! Each engine is a mapping table ([`table`]) written from what its metrics *mean*
//! (docs/engines.md), not from what they are called; [`build`] applies a table to a
//! scrape generically. Series are grouped per model (`model_name`, Dynamo's `model`, none
//! for TGI and llama.cpp) and kept per source series (data-parallel `engine` ranks and the like) so that
//! rates can be taken per series first, as PromQL does.

mod build;
mod detect;
mod dynamo;
mod engines;
mod index;
mod intern;
mod llamacpp;
mod nim;
mod resolve;
mod sglang;
pub mod table;
mod tgi;
mod trtllm;
mod vllm;

pub use detect::detect;
pub(crate) use engines::engine_table;

use crate::canonical::{Engine, Snapshot};
use crate::parse::Exposition;

/// Which engine a target runs: named in config, or detected from the scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineHint {
    #[default]
    Auto,
    Is(Engine),
}

/// Why a parsed scrape could not be mapped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdaptError {
    /// No metrics of a known engine, or none of the named one; the message says what to do.
    #[error("{0}")]
    NoEngineMetrics(String),
    /// The engine metrics name more models than the caller allows ([`adapt_bounded`]).
    #[error("the scrape holds {found} models, more than the limit of {limit}")]
    TooManyModels { found: usize, limit: usize },
}

/// Maps one parsed exposition onto the canonical model. `default_model` names the model
/// for engines whose metrics carry no model label (TGI) and for series that lack it.
pub fn adapt(exposition: &Exposition<'_>, hint: EngineHint, default_model: &str) -> Result<Snapshot, AdaptError> {
    adapt_bounded(exposition, hint, default_model, usize::MAX)
}

/// [`adapt`] that refuses a scrape whose engine metrics name more than `max_models` models
/// before building any of them: a model costs about a kilobyte to build, and a hostile
/// 16 MiB body can name 800,000 (docs/limits.md).
pub fn adapt_bounded(
    exposition: &Exposition<'_>,
    hint: EngineHint,
    default_model: &str,
    max_models: usize,
) -> Result<Snapshot, AdaptError> {
    let engine = match hint {
        EngineHint::Is(e) => e,
        EngineHint::Auto => detect(exposition).ok_or_else(|| {
            AdaptError::NoEngineMetrics(
                "no metrics of a known engine (vLLM, SGLang, TGI, TensorRT-LLM, NIM, Dynamo frontend, llama.cpp) in this scrape; \
                 check the URL points at the engine's /metrics, or set `engine:` on the target"
                    .into(),
            )
        })?,
    };
    let snapshot = build::build(exposition, engine, default_model, max_models)
        .map_err(|found| AdaptError::TooManyModels { found, limit: max_models })?;
    if snapshot.models.is_empty() {
        return Err(AdaptError::NoEngineMetrics(format!(
            "the scrape has none of the {engine} metrics goodput reads; is `engine: {engine}` right for this target?"
        )));
    }
    Ok(snapshot)
}

#[cfg(test)]
mod oracle;
#[cfg(test)]
mod oracle_tests;
#[cfg(test)]
mod tests;
