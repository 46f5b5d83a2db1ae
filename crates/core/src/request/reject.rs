//! Why the request store refuses a record, or only its model name: the `reason` label of
//! `llm_slo_request_store_rejected_total` (docs/limits.md#request-store). A module of its
//! own so that the store and the admission of model names ([`super::attribute`]) both
//! name the reasons without importing each other.

use super::compact::Invalid;

/// Why the store refused a record, or its model name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reject {
    /// The record names a target the config does not have.
    UnknownTarget,
    /// An impossible number (see [`Invalid`]).
    Invalid,
    /// Finished more than [`MAX_CLOCK_SKEW_MS`](super::MAX_CLOCK_SKEW_MS) after the daemon's now.
    Future,
    /// The model name is longer than a label value may be
    /// ([`MAX_LABEL_VALUE_BYTES`](crate::parse::MAX_LABEL_VALUE_BYTES)).
    ModelTooLong,
    /// The target is not known to serve the model ([`super::attribute`]).
    UnknownModel,
}

impl Reject {
    pub const ALL: [Reject; 5] =
        [Reject::UnknownTarget, Reject::Invalid, Reject::Future, Reject::ModelTooLong, Reject::UnknownModel];

    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Reject::UnknownTarget => "unknown_target",
            Reject::Invalid => "invalid",
            Reject::Future => "future",
            Reject::ModelTooLong => "model_too_long",
            Reject::UnknownModel => "unknown_model",
        }
    }

    /// Whether the whole record was refused (it is then in no window and no counter);
    /// otherwise only its model name was, and it is counted under `model=""`.
    pub fn whole(self) -> bool {
        matches!(self, Reject::UnknownTarget | Reject::Invalid | Reject::Future)
    }
}

impl From<Invalid> for Reject {
    fn from(_: Invalid) -> Reject {
        Reject::Invalid
    }
}
