//! Why a scrape was rejected, and where.

use std::fmt;

/// A rejected exposition. `line` is 1-based; 0 means the whole body (size, encoding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub kind: ParseErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseErrorKind {
    BodyTooLarge { limit: usize, got: usize },
    TooManySamples { limit: usize },
    TooManyLabels { limit: usize },
    LabelNameTooLong { limit: usize },
    LabelValueTooLong { name: String, limit: usize },
    InvalidUtf8,
    InvalidMetricName(String),
    InvalidLabelName(String),
    DuplicateLabel(String),
    InvalidValue(String),
    InvalidTimestamp(String),
    Syntax(String),
}

impl ParseError {
    pub(crate) fn at(line: impl TryInto<usize>, kind: ParseErrorKind) -> Self {
        ParseError { line: line.try_into().unwrap_or(usize::MAX), kind }
    }

    pub(crate) fn whole(kind: ParseErrorKind) -> Self {
        ParseError { line: 0, kind }
    }

    /// A short machine-friendly reason, used as the `reason` label of scrape errors.
    pub fn reason(&self) -> &'static str {
        match self.kind {
            ParseErrorKind::BodyTooLarge { .. } => "body_too_large",
            ParseErrorKind::TooManySamples { .. } => "too_many_samples",
            ParseErrorKind::TooManyLabels { .. }
            | ParseErrorKind::LabelNameTooLong { .. }
            | ParseErrorKind::LabelValueTooLong { .. } => "label_limit",
            _ => "parse_error",
        }
    }
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseErrorKind::BodyTooLarge { limit, got } => {
                write!(f, "body is {got} bytes, over the limit of {limit} bytes; expose fewer series or raise the limit")
            }
            ParseErrorKind::TooManySamples { limit } => write!(f, "more than {limit} samples in one scrape; expose fewer series or raise the limit"),
            ParseErrorKind::TooManyLabels { limit } => write!(f, "more than {limit} labels on one sample; raise the limit if this is intended"),
            ParseErrorKind::LabelNameTooLong { limit } => write!(f, "label name longer than {limit} bytes; raise the limit if this is intended"),
            ParseErrorKind::LabelValueTooLong { name, limit } => {
                write!(f, "value of label {name:?} longer than {limit} bytes; raise the limit if this is intended")
            }
            ParseErrorKind::InvalidUtf8 => f.write_str("body is not valid UTF-8; is the target serving the Prometheus text format (not protobuf, not compressed)?"),
            ParseErrorKind::InvalidMetricName(n) => write!(f, "invalid metric name {n:?}"),
            ParseErrorKind::InvalidLabelName(n) => write!(f, "invalid label name {n:?}"),
            ParseErrorKind::DuplicateLabel(n) => write!(f, "label {n:?} appears twice"),
            ParseErrorKind::InvalidValue(v) => write!(f, "invalid sample value {v:?}"),
            ParseErrorKind::InvalidTimestamp(v) => write!(f, "invalid timestamp {v:?}"),
            ParseErrorKind::Syntax(m) => f.write_str(m),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 { write!(f, "{}", self.kind) } else { write!(f, "line {}: {}", self.line, self.kind) }
    }
}

impl std::error::Error for ParseError {}
