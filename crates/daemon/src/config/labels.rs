//! `external_labels` (docs/config.md#external_labels): labels added to every series goodput
//! exports and to every alert it sends, so that sidecars of one model in several pods, or
//! daemons in several clusters, give distinct series and distinct alerts.
//!
//! A value may name environment variables, `${POD_NAME}`, which Kubernetes fills from the
//! Downward API. Only these values are expanded, and only this one form: an unset or empty
//! variable is an error, never an empty label (Prometheus drops a label whose value is
//! empty, which would merge the replicas again).

use std::collections::BTreeMap;

use super::error::Diagnostics;
use super::raw::S;

/// Label names goodput sets itself, on its series (docs/metrics.md) or its alerts
/// (docs/alerts.md), and those a Prometheus scrape sets (`job`, `instance`). An external
/// label of one of these names would collide with goodput's own on some series.
pub const RESERVED: &[&str] = &[
    "alertname",
    "band",
    "bound",
    "clause",
    "commit",
    "component",
    "destination",
    "direction",
    "engine",
    "estimate",
    "finished_reason",
    "generation_tokens_le",
    "gpu",
    "instance",
    "job",
    "kind",
    "le",
    "limit",
    "metric",
    "model",
    "model_name",
    "outcome",
    "period",
    "position",
    "prompt_tokens_le",
    "q",
    "quantile",
    "reason",
    "reference",
    "result",
    "severity",
    "side",
    "slo",
    "source",
    "stat",
    "state",
    "status",
    "target",
    "uuid",
    "version",
    "window",
];

/// Validates names, expands `${VAR}` from `env`, and returns the labels sorted by name.
pub(super) fn external_labels_section(
    d: &mut Diagnostics,
    raw: Option<&S<BTreeMap<String, S<String>>>>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, value) in raw.map(|r| &r.value).into_iter().flatten() {
        if let Err(e) = check_name(name) {
            d.error(value.pos, format!("external_labels: {e}"));
            continue;
        }
        match expand(&value.value, env) {
            Ok(v) if v.is_empty() => d.error(
                value.pos,
                format!(
                    "external_labels.{name} is empty; Prometheus drops empty labels, so give it a value or remove it"
                ),
            ),
            Ok(v) => out.push((name.clone(), v)),
            Err(e) => d.error(value.pos, format!("external_labels.{name}: {e}")),
        }
    }
    out
}

/// Why a name cannot be an external label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelNameError {
    #[error("{0:?} is not a Prometheus label name: letters, digits and underscores, not starting with a digit")]
    Invalid(String),
    #[error("{0:?}: names starting with __ are reserved for Prometheus's internal use")]
    Internal(String),
    #[error(
        "{0:?} is a label goodput sets itself on its series or alerts; choose another name (cluster, region, replica, pod, …)"
    )]
    Goodputs(String),
}

/// A Prometheus label name that goodput does not set itself.
fn check_name(name: &str) -> Result<(), LabelNameError> {
    if !is_identifier(name) {
        return Err(LabelNameError::Invalid(name.to_string()));
    }
    if name.starts_with("__") {
        return Err(LabelNameError::Internal(name.to_string()));
    }
    if RESERVED.contains(&name) {
        return Err(LabelNameError::Goodputs(name.to_string()));
    }
    Ok(())
}

/// Letters, digits and underscores, not starting with a digit: a label and a variable name.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a value's `${NAME}` cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("a lone $ in {0:?}; write ${{NAME}} for a variable or $$ for a literal $")]
    LoneDollar(String),
    #[error("an unclosed ${{ in {0:?}; write ${{NAME}}")]
    Unclosed(String),
    #[error("${{{0}}} is not a variable name (letters, digits, underscores)")]
    NotAName(String),
    #[error("${{{0}}} is set but empty in goodput's environment; give it a value")]
    Empty(String),
    #[error(
        "${{{0}}} is not set in goodput's environment; set it (in Kubernetes, from the Downward API: env[].valueFrom.fieldRef) or write the value itself"
    )]
    Unset(String),
}

/// Replaces each `${NAME}` with the variable's value; `$$` is a literal `$`.
pub fn expand(value: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
            continue;
        }
        let Some(body) = after.strip_prefix('{') else {
            return Err(ExpandError::LoneDollar(value.to_string()));
        };
        let Some(end) = body.find('}') else {
            return Err(ExpandError::Unclosed(value.to_string()));
        };
        let name = &body[..end];
        if !is_identifier(name) {
            return Err(ExpandError::NotAName(name.to_string()));
        }
        match env(name) {
            Some(v) if !v.is_empty() => out.push_str(&v),
            Some(_) => return Err(ExpandError::Empty(name.to_string())),
            None => return Err(ExpandError::Unset(name.to_string())),
        }
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        match k {
            "POD_NAME" => Some("vllm-7d9f-abcde".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_variables_and_escapes() {
        assert_eq!(expand("${POD_NAME}", &env).unwrap(), "vllm-7d9f-abcde");
        assert_eq!(expand("pod-${POD_NAME}-x", &env).unwrap(), "pod-vllm-7d9f-abcde-x");
        assert_eq!(expand("cost$$", &env).unwrap(), "cost$");
        assert_eq!(expand("prod-east", &env).unwrap(), "prod-east");
    }

    #[test]
    fn unset_empty_and_malformed_variables_are_errors() {
        assert!(expand("${NODE_NAME}", &env).unwrap_err().to_string().contains("not set"));
        assert!(expand("${EMPTY}", &env).unwrap_err().to_string().contains("empty"));
        assert!(expand("$POD_NAME", &env).unwrap_err().to_string().contains("lone $"));
        assert!(expand("${POD_NAME", &env).unwrap_err().to_string().contains("unclosed"));
        assert!(expand("${1X}", &env).unwrap_err().to_string().contains("not a variable name"));
    }

    #[test]
    fn names_are_prometheus_label_names_goodput_does_not_set() {
        assert!(check_name("cluster").is_ok());
        assert!(check_name("_replica2").is_ok());
        assert!(check_name("2nd").is_err());
        assert!(check_name("k8s-pod").is_err());
        assert!(check_name("__name__").is_err());
        for own in ["target", "model", "window", "slo", "source", "q", "alertname", "severity", "job"] {
            assert!(check_name(own).unwrap_err().to_string().contains("goodput sets itself"), "{own}");
        }
    }
}
