//! What one export decodes to: its LLM request spans, each with the `service.name` of the
//! resource that sent it, within a budget of decoded bytes; everything else is only
//! counted. The decoders ([`super::wire`], [`super::json`]) walk the body and hand each
//! span here as they meet it, so an export never exists whole in memory as OTLP's types:
//! a body of millions of empty spans costs its own bytes and nothing more
//! (docs/limits.md).

use std::collections::BTreeMap;

use crate::request::{AttrValue, SpanInput};

/// Attributes kept per span: only `gen_ai.*` ones are read, about fifteen of them. Past
/// this a span's further attributes are not kept.
pub const MAX_KEPT_ATTRIBUTES: usize = 64;

/// Elements kept of an array value (`gen_ai.response.finish_reasons` has one per choice).
pub const MAX_ARRAY_ELEMENTS: usize = 64;

/// The LLM request spans of one export, in the order they came.
#[derive(Debug, Default)]
pub struct Batch {
    /// The `service.name` of each resource that sent a kept span.
    services: Vec<Option<String>>,
    spans: Vec<(usize, SpanInput)>,
    /// Spans that are no LLM request (no `gen_ai.latency.*` attribute).
    pub not_llm: u64,
    /// LLM request spans not kept because the batch had reached its budget.
    pub over_budget: u64,
    bytes: usize,
    budget: usize,
}

impl Batch {
    /// A batch holding at most `budget` decoded bytes of spans.
    pub fn new(budget: usize) -> Batch {
        Batch { budget, ..Batch::default() }
    }

    /// Starts the spans of a new resource, whose service name may come later
    /// ([`Batch::service`]): a message's fields can come in any order.
    pub fn resource(&mut self) {
        // A resource none of whose spans was kept leaves no trace, so that an export of
        // millions of empty resources costs nothing.
        let unused = self.spans.last().is_none_or(|(s, _)| *s + 1 < self.services.len());
        if unused && let Some(last) = self.services.last_mut() {
            *last = None;
        } else {
            self.services.push(None);
        }
    }

    /// The current resource's `service.name`; the first one given counts.
    pub fn service(&mut self, name: &str) {
        if self.services.is_empty() {
            self.services.push(None);
        }
        if let Some(s) = self.services.last_mut()
            && s.is_none()
            && !name.is_empty()
        {
            *s = Some(name.to_string());
        }
    }

    /// One span of the current resource.
    pub fn span(&mut self, span: SpanInput) {
        if !span.is_llm_request() {
            self.not_llm += 1;
            return;
        }
        let size = decoded_size(&span);
        if self.bytes + size > self.budget {
            self.over_budget += 1;
            return;
        }
        self.bytes += size;
        if self.services.is_empty() {
            self.services.push(None);
        }
        self.spans.push((self.services.len() - 1, span));
    }

    /// Each kept span with its resource's `service.name`.
    pub fn spans(&self) -> impl Iterator<Item = (Option<&str>, &SpanInput)> {
        self.spans.iter().map(|(s, span)| (self.services[*s].as_deref(), span))
    }

    /// Spans kept.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// Collects a span's `gen_ai.*` attributes, up to [`MAX_KEPT_ATTRIBUTES`].
#[derive(Debug, Default)]
pub struct Attributes(BTreeMap<String, AttrValue>);

impl Attributes {
    /// Whether an attribute named `key` is kept (read before its value is decoded).
    pub fn wants(&self, key: &str) -> bool {
        key.starts_with("gen_ai.") && (self.0.len() < MAX_KEPT_ATTRIBUTES || self.0.contains_key(key))
    }

    pub fn insert(&mut self, key: &str, value: AttrValue) {
        if self.wants(key) {
            self.0.insert(key.to_string(), value);
        }
    }

    pub fn into_map(self) -> BTreeMap<String, AttrValue> {
        self.0
    }
}

/// About what a kept span holds in memory: the struct, its name, and per attribute the
/// map's node, the key and the value.
fn decoded_size(span: &SpanInput) -> usize {
    const NODE: usize = 64;
    std::mem::size_of::<SpanInput>()
        + span.name.len()
        + span.attributes.iter().map(|(k, v)| NODE + k.len() + value_size(v)).sum::<usize>()
}

fn value_size(v: &AttrValue) -> usize {
    std::mem::size_of::<AttrValue>()
        + match v {
            AttrValue::Str(s) => s.len(),
            AttrValue::Array(a) => a.iter().map(value_size).sum(),
            _ => 0,
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(name: &str, latency: bool) -> SpanInput {
        let mut attributes = BTreeMap::new();
        if latency {
            attributes.insert("gen_ai.latency.e2e".to_string(), AttrValue::Double(1.0));
        }
        SpanInput { name: name.into(), attributes, ..SpanInput::default() }
    }

    #[test]
    fn spans_are_kept_with_their_service_until_the_budget() {
        let one = decoded_size(&span("llm_request", true));
        let mut b = Batch::new(2 * one + one / 2);
        b.resource();
        b.span(span("llm_request", true));
        b.service("a");
        b.service("b");
        b.span(span("GET /health", false));
        for _ in 0..1000 {
            b.resource();
            b.span(span("GET /health", false));
        }
        b.span(span("llm_request", true));
        b.span(span("llm_request", true));
        let got: Vec<Option<&str>> = b.spans().map(|(s, _)| s).collect();
        assert_eq!(got, vec![Some("a"), None], "a service named after its spans names them, once");
        assert_eq!((b.not_llm, b.over_budget), (1001, 1));
        assert_eq!(b.services.len(), 2, "resources without kept spans take no room");
    }

    #[test]
    fn only_gen_ai_attributes_are_kept_and_only_so_many() {
        let mut a = Attributes::default();
        a.insert("http.route", AttrValue::Other);
        for i in 0..MAX_KEPT_ATTRIBUTES + 5 {
            a.insert(&format!("gen_ai.x{i:03}"), AttrValue::Int(i as i64));
        }
        assert!(a.wants("gen_ai.x000"), "a kept key may be written again");
        let m = a.into_map();
        assert_eq!(m.len(), MAX_KEPT_ATTRIBUTES);
        assert!(!m.contains_key("http.route"));
    }
}
