//! Which series a record joins (docs/request-path.md#which-series-a-record-joins).
//!
//! A record's model name comes from a client (the request body) or from whoever sent a span,
//! so it can be anything: megabytes long, or a new name in every request. A series per name
//! would let any client fill a target's series and push the real model out. So a record
//! keeps its model only when that name can be a label and the target is known to serve it;
//! every other record is counted under `model=""`, with the reason.

use std::collections::BTreeSet;

use super::record::{RequestRecord, Status};
use super::reject::Reject;
use crate::parse::MAX_LABEL_VALUE_BYTES;

/// A model name as a producer puts it into a record: unchanged up to the longest label value
/// a scrape may bring, else cut to just past that length. The record stays small on its
/// way to the store, and the store still sees that the name was too long
/// ([`Reject::ModelTooLong`]) and counts the record under `model=""`.
pub fn model_at_entry(model: &str) -> String {
    if model.len() <= MAX_LABEL_VALUE_BYTES {
        return model.to_string();
    }
    let mut end = MAX_LABEL_VALUE_BYTES + 1;
    while !model.is_char_boundary(end) {
        end += 1;
    }
    model[..end].to_string()
}

/// The models one target is known to serve.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Known {
    /// The target's `model` setting: what a span that names no model is recorded under, and
    /// the model of an engine whose metrics carry no model label.
    pub configured: String,
    /// The models the target's latest evaluation found in its scrapes.
    pub scraped: BTreeSet<String>,
}

impl Known {
    pub fn serves(&self, model: &str) -> bool {
        model == self.configured || self.scraped.contains(model)
    }
}

/// Why `r` may not have a series of its own model, if it may not. `known` is what its target
/// is known to serve; `has_series` whether the model has a series already (from either
/// source).
///
/// - A name longer than a label value may be is [`Reject::ModelTooLong`].
/// - A name the target is known to serve keeps its series, whatever the outcome: a 400 or
///   429 for the served model is that model's failure.
/// - Once the target's scrapes have named models, any other name is [`Reject::UnknownModel`].
/// - While they have named none (no scrape yet, or a target that cannot be scraped), the
///   outcome decides: a request the engine refused with a 4xx (vLLM answers a model it does
///   not serve with 404) does not create a series, and is [`Reject::UnknownModel`] unless
///   its model has one already; any other outcome means the engine took the request for
///   that model.
///
/// A record that names no model (`""`) is already where the others go, and is not counted.
pub(super) fn unattributed(
    r: &RequestRecord,
    known: Option<&Known>,
    has_series: impl FnOnce() -> bool,
) -> Option<Reject> {
    if r.model.len() > MAX_LABEL_VALUE_BYTES {
        return Some(Reject::ModelTooLong);
    }
    if r.model.is_empty() || known.is_some_and(|k| k.serves(&r.model)) {
        return None;
    }
    let scraped = known.is_some_and(|k| !k.scraped.is_empty());
    let refused = matches!(r.status, Status::HttpError(400..=499));
    (scraped || (refused && !has_series())).then_some(Reject::UnknownModel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_just_past_the_label_limit_on_a_char_boundary() {
        assert_eq!(model_at_entry("llama"), "llama");
        let at_limit = "a".repeat(MAX_LABEL_VALUE_BYTES);
        assert_eq!(model_at_entry(&at_limit), at_limit);
        assert_eq!(model_at_entry(&"b".repeat(3 << 20)).len(), MAX_LABEL_VALUE_BYTES + 1);
        // Three-byte characters: the cut lands after the one that crosses the limit.
        let wide = "€".repeat(MAX_LABEL_VALUE_BYTES);
        let cut = model_at_entry(&wide);
        assert!(cut.len() > MAX_LABEL_VALUE_BYTES && cut.len() <= MAX_LABEL_VALUE_BYTES + 3, "{}", cut.len());
        assert!(wide.starts_with(&cut));
    }
}
