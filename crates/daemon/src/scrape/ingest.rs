//! A scrape body → a canonical snapshot. Pure: no I/O, no clock.

use std::sync::Arc;

use crate::adapt::{AdaptError, EngineHint, adapt_bounded};
use crate::canonical::Snapshot;
use crate::config::Cardinality;
use crate::parse::{Exposition, Limits, parse};
use crate::target::Scraped;
use crate::window::stored_series;

use super::{Reuse, ScrapeError};

/// Parses `body` within `limits`, maps it onto the canonical model and refuses it whole
/// when it brings more models or series than `cardinality` allows.
pub fn ingest(
    body: &[u8],
    limits: &Limits,
    cardinality: Cardinality,
    hint: EngineHint,
    default_model: &str,
) -> Result<Snapshot, ScrapeError> {
    let exposition = parse_body(body, limits)?;
    adapt_checked(&exposition, cardinality, hint, default_model)
}

/// [`ingest`] for a target scraped again and again: a scrape with the same series as the
/// previous ones comes back as values in the stored layout, without adapting it
/// ([`Reuse`]); what the store ends up holding, and every error, are as with [`ingest`].
pub fn ingest_reusing(
    body: &[u8],
    limits: &Limits,
    cardinality: Cardinality,
    hint: EngineHint,
    default_model: &str,
    reuse: &mut Reuse,
) -> Result<Scraped, ScrapeError> {
    let mut exposition = parse_body(body, limits)?;
    let (fingerprint, values) = reuse.values(&exposition, hint, default_model, cardinality);
    if let Some(v) = values {
        return Ok(Scraped::Values(v));
    }
    let snapshot = Arc::new(adapt_checked(&exposition, cardinality, hint, default_model)?);
    reuse.learn(fingerprint, &mut exposition, &snapshot, hint, default_model, cardinality);
    Ok(Scraped::Snapshot(snapshot))
}

fn parse_body<'a>(body: &'a [u8], limits: &Limits) -> Result<Exposition<'a>, ScrapeError> {
    parse(body, limits).map_err(|e| ScrapeError::new(e.reason(), format!("cannot parse the exposition: {e}")))
}

fn adapt_checked(
    exposition: &Exposition<'_>,
    cardinality: Cardinality,
    hint: EngineHint,
    default_model: &str,
) -> Result<Snapshot, ScrapeError> {
    let snapshot = adapt_bounded(exposition, hint, default_model, cardinality.max_models).map_err(|e| match e {
        AdaptError::TooManyModels { found, limit } => too_many_models(found, limit),
        AdaptError::NoEngineMetrics(_) => ScrapeError::new("adapt_error", format!("no usable engine metrics: {e}")),
    })?;
    check_cardinality(&snapshot, cardinality)?;
    Ok(snapshot)
}

fn too_many_models(found: usize, limit: usize) -> ScrapeError {
    ScrapeError::new(
        "too_many_models",
        format!(
            "the scrape holds {found} models, more than max_models ({limit}); if the engine really serves that \
             many, raise scrape.max_models or the target's max_models, else fix the label that varies \
             (docs/limits.md)"
        ),
    )
}

/// Like Prometheus's `sample_limit`: a scrape over a limit is a failed scrape, and nothing
/// of it is stored. A label gone wrong (a request id as `model_name`) must not make the
/// daemon evaluate and export thousands of "models". Most such scrapes are
/// refused while adapting, before their models are built; this catches the rest (series
/// without a model label attached to a default model).
fn check_cardinality(snapshot: &Snapshot, c: Cardinality) -> Result<(), ScrapeError> {
    let models = snapshot.models.len();
    if models > c.max_models {
        return Err(too_many_models(models, c.max_models));
    }
    let mut series = 0usize;
    for m in snapshot.models.values() {
        series += stored_series(m);
    }
    if series > c.max_series {
        return Err(ScrapeError::new(
            "too_many_series",
            format!(
                "the scrape holds {series} series of engine metrics, more than max_series ({}); raise \
                 scrape.max_series or the target's max_series if the engine really has that many (docs/limits.md)",
                c.max_series
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(models: usize) -> String {
        let mut b = String::from("# TYPE vllm:num_requests_running gauge\n");
        for i in 0..models {
            b.push_str(&format!("vllm:num_requests_running{{model_name=\"m{i}\",engine=\"0\"}} 1\n"));
            b.push_str(&format!("vllm:num_requests_running{{model_name=\"m{i}\",engine=\"1\"}} 2\n"));
        }
        b
    }

    fn run(models: usize, c: Cardinality) -> Result<Snapshot, ScrapeError> {
        ingest(body(models).as_bytes(), &Limits::default(), c, EngineHint::Auto, "x")
    }

    #[test]
    fn a_scrape_at_the_limits_passes_and_one_over_fails_with_the_reason() {
        let c = Cardinality { max_models: 3, max_series: 6 };
        assert_eq!(run(3, c).unwrap().models.len(), 3);
        let e = run(4, c).unwrap_err();
        assert_eq!(e.reason(), "too_many_models");
        assert!(e.message().contains("4 models, more than max_models (3)"), "{e}");
        // Two shards per model: 3 models are 6 series, over a limit of 5.
        let e = run(3, Cardinality { max_series: 5, ..c }).unwrap_err();
        assert_eq!(e.reason(), "too_many_series");
        assert!(e.message().contains("6 series"), "{e}");
    }
}
