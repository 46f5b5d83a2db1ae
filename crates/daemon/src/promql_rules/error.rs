//! Why `goodput rules` cannot write the rules a config asks for. Each message says what to
//! change; none of them is ever worked around by writing wider rules than the SLO.

/// A `--selector` that is not PromQL label matchers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--selector {selector:?}: {problem}")]
pub struct SelectorError {
    pub selector: String,
    pub problem: SelectorProblem,
}

/// What is wrong in a `--selector`, at the first place it goes wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorProblem {
    #[error("expected a label name at {at:?}, like job=\"vllm\"")]
    ExpectedName { at: String },
    #[error("{name} needs one of = != =~ !~ and a quoted value")]
    NoOperator { name: String },
    /// `job=vllm`: rules built on it would fail to load in Prometheus.
    #[error("the value of {name} must be quoted, like {name}{op}\"{value}\"")]
    Unquoted { name: String, op: &'static str, value: String },
    #[error("the value of {name} has no closing {quote}")]
    Unclosed { name: String, quote: char },
    #[error("expected a comma before {at:?}")]
    ExpectedComma { at: String },
}

/// Why an SLO's scope cannot be written in PromQL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// Prometheus's series carry an `instance`, not goodput's target names.
    #[error(
        "slo {slo:?} is scoped to targets [{}], but Prometheus's series do not carry goodput's target names: the generated rules tell pods apart by their `instance` label, so the scope cannot be written without knowing each target's instance. Pass {} (the `instance` label Prometheus gives that target's series), or scope the SLO by `models:` instead. Generating it without the scope would judge every pod by this SLO.",
        targets.join(", "),
        missing.iter().map(|t| format!("--target-instance {t}=HOST:PORT")).collect::<Vec<_>>().join(" ")
    )]
    TargetsWithoutInstance { slo: String, targets: Vec<String>, missing: Vec<String> },
}

/// The rules could not be serialized as YAML.
#[derive(Debug, thiserror::Error)]
#[error("cannot render rules as YAML: {0}")]
pub struct RenderError(pub String);
