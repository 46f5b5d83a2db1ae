//! Which target a span belongs to, and the span in the core's neutral terms.
//!
//! A span belongs to the target whose service name (`traces.service_name`, else the target's
//! name) equals the `service.name` of the resource that sent it. One exception, because it
//! cannot be a guess: a config with a single target that does not set `traces:` takes every
//! LLM request span, whatever its service name (vLLM's is `unknown_service` unless
//! OTEL_SERVICE_NAME is set). Everything else is unmapped, counted and logged, never
//! assigned by likeness.

use std::collections::HashMap;

use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value::Value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{Span, status::StatusCode};

use crate::config::Target;
use crate::request::{AttrValue, SpanInput};

/// A target as spans see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    pub name: String,
    /// Filled into records whose span names no model (vLLM's does not).
    pub model: String,
}

/// The service name → target table, built once from the config.
#[derive(Debug, Clone)]
pub struct Routes {
    targets: Vec<Routed>,
    by_service: HashMap<String, usize>,
    /// The index of the single target that takes every span, when there is one.
    catch_all: Option<usize>,
}

impl Routes {
    pub fn new(targets: &[Target]) -> Routes {
        let by_service = targets.iter().enumerate().map(|(i, t)| (t.service_name().to_string(), i)).collect();
        let catch_all = match targets {
            [only] if only.traces.is_none() => Some(0),
            _ => None,
        };
        let targets = targets.iter().map(|t| Routed { name: t.name.clone(), model: t.model.clone() }).collect();
        Routes { targets, by_service, catch_all }
    }

    /// The index of the target that takes spans of `service` (the resource's `service.name`).
    pub fn target_for(&self, service: Option<&str>) -> Option<usize> {
        service.and_then(|s| self.by_service.get(s).copied()).or(self.catch_all)
    }

    pub fn target(&self, i: usize) -> &Routed {
        &self.targets[i]
    }
}

/// The resource's `service.name`, when it has a non-empty one.
pub fn service_name(resource: Option<&Resource>) -> Option<&str> {
    resource?.attributes.iter().find(|kv| kv.key == "service.name").and_then(|kv| match &kv.value {
        Some(AnyValue { value: Some(Value::StringValue(s)) }) if !s.is_empty() => Some(s.as_str()),
        _ => None,
    })
}

/// The span as the core's mapping reads it. Only `gen_ai.*` attributes are carried: the
/// mapping reads no others, and an application's spans may have many.
pub fn span_input(span: &Span) -> SpanInput {
    SpanInput {
        name: span.name.clone(),
        start_unix_nano: span.start_time_unix_nano,
        end_unix_nano: span.end_time_unix_nano,
        error: span.status.as_ref().is_some_and(|s| s.code == StatusCode::Error as i32),
        attributes: span
            .attributes
            .iter()
            .filter(|kv| kv.key.starts_with("gen_ai."))
            .map(|kv| (kv.key.clone(), kv.value.as_ref().map_or(AttrValue::Other, attr)))
            .collect(),
    }
}

fn attr(v: &AnyValue) -> AttrValue {
    match &v.value {
        Some(Value::StringValue(s)) => AttrValue::Str(s.clone()),
        Some(Value::IntValue(n)) => AttrValue::Int(*n),
        Some(Value::DoubleValue(d)) => AttrValue::Double(*d),
        Some(Value::BoolValue(b)) => AttrValue::Bool(*b),
        Some(Value::ArrayValue(a)) => AttrValue::Array(a.values.iter().map(attr).collect()),
        Some(Value::KvlistValue(_) | Value::BytesValue(_) | Value::StringValueStrindex(_)) | None => AttrValue::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config;
    use opentelemetry_proto::tonic::common::v1::KeyValue;

    fn targets(yaml: &str) -> Vec<Target> {
        config::from_str(yaml, "t.yaml").unwrap().config.targets
    }

    #[test]
    fn spans_go_to_the_target_that_names_their_service() {
        let t = targets(
            "targets:\n  - {name: a, url: 'http://127.0.0.1:1/metrics'}\n  - {name: b, url: 'http://127.0.0.1:2/metrics', model: llama, traces: {service_name: vllm-b}}\n",
        );
        let r = Routes::new(&t);
        assert_eq!(r.target_for(Some("a")), Some(0), "a target's name is its default service name");
        assert_eq!(r.target_for(Some("vllm-b")), Some(1));
        assert_eq!(r.target(1), &Routed { name: "b".into(), model: "llama".into() });
        assert_eq!(r.target_for(Some("b")), None, "b's spans are those of vllm-b only");
        assert_eq!(r.target_for(Some("unknown_service")), None);
        assert_eq!(r.target_for(None), None);
    }

    #[test]
    fn a_single_target_without_traces_takes_every_span_and_one_with_traces_does_not() {
        let r = Routes::new(&targets("targets: [{name: a, url: 'http://127.0.0.1:1/metrics'}]"));
        assert_eq!(r.target_for(Some("unknown_service")), Some(0));
        assert_eq!(r.target_for(None), Some(0));
        let r =
            Routes::new(&targets("targets: [{name: a, url: 'http://127.0.0.1:1/metrics', traces: {service_name: v}}]"));
        assert_eq!(r.target_for(Some("v")), Some(0));
        assert_eq!(r.target_for(Some("unknown_service")), None);
    }

    #[test]
    fn only_gen_ai_attributes_are_carried_with_their_types() {
        let kv = |k: &str, v: Value| KeyValue {
            key: k.into(),
            value: Some(AnyValue { value: Some(v) }),
            ..Default::default()
        };
        let span = Span {
            name: "llm_request".into(),
            start_time_unix_nano: 5,
            end_time_unix_nano: 9,
            attributes: vec![
                kv("gen_ai.latency.e2e", Value::DoubleValue(1.5)),
                kv("gen_ai.usage.completion_tokens", Value::IntValue(3)),
                kv("http.route", Value::StringValue("/v1/completions".into())),
                KeyValue { key: "gen_ai.request.id".into(), value: None, ..Default::default() },
            ],
            status: Some(opentelemetry_proto::tonic::trace::v1::Status {
                code: StatusCode::Error as i32,
                message: String::new(),
            }),
            ..Default::default()
        };
        let s = span_input(&span);
        assert_eq!((s.start_unix_nano, s.end_unix_nano, s.error), (5, 9, true));
        let keys: Vec<&str> = s.attributes.keys().map(String::as_str).collect();
        assert_eq!(keys, ["gen_ai.latency.e2e", "gen_ai.request.id", "gen_ai.usage.completion_tokens"]);
        assert_eq!(s.attributes["gen_ai.latency.e2e"], AttrValue::Double(1.5));
        assert_eq!(s.attributes["gen_ai.usage.completion_tokens"], AttrValue::Int(3));
        assert_eq!(s.attributes["gen_ai.request.id"], AttrValue::Other);
    }
}
