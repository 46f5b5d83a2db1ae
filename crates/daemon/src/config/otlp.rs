//! Meaning checks for `otlp:` (the engine-trace receiver) and `targets[].traces:` (which
//! spans are each target's), each error at the value that causes it.

use std::collections::HashMap;
use std::net::SocketAddr;

use super::bytes::parse_bytes;
use super::error::{Diagnostics, Pos};
use super::raw::{RawOtlp, RawTarget, RawTraces, S};
use super::tap::{RawGuards, guards};
use super::types::{
    DEFAULT_OTLP_BODY_LIMIT, DEFAULT_OTLP_MAX_CONNECTIONS, ListenerGuards, OtlpConfig, Target, TargetTraces,
};

impl Target {
    /// The `service.name` of this target's spans: `traces.service_name`, else its name.
    pub fn service_name(&self) -> &str {
        self.traces.as_ref().map_or(self.name.as_str(), |t| t.service_name.as_str())
    }
}

pub(super) fn target_traces(d: &mut Diagnostics, raw: Option<&S<RawTraces>>) -> Option<TargetTraces> {
    let s = &raw?.value.service_name;
    let name = s.value.trim();
    if name.is_empty() {
        d.error(s.pos, "traces.service_name is empty; give the service.name your engine's spans carry (OTEL_SERVICE_NAME), or remove `traces:` to use the target's name");
        return None;
    }
    Some(TargetTraces { service_name: name.to_string() })
}

/// The receiver's settings, and the checks that span several targets: no two targets may
/// claim the same service name, since a span must belong to one.
pub(super) fn otlp_section(
    d: &mut Diagnostics,
    raw: Option<&S<RawOtlp>>,
    listen: Option<SocketAddr>,
    targets: Option<&S<Vec<RawTarget>>>,
) -> Option<OtlpConfig> {
    let targets = targets.map(|t| t.value.as_slice()).unwrap_or_default();
    service_names(d, targets);
    let Some(raw) = raw else {
        if let Some(t) = targets.iter().find_map(|t| t.traces.as_ref()) {
            d.warn(t.pos, "targets[].traces has no effect without a top-level `otlp: {listen: ADDR}`, where engines send their spans");
        }
        return None;
    };
    let l = &raw.value.listen;
    let at = match l.value.trim().parse::<SocketAddr>() {
        Ok(a) => Some(a),
        Err(_) => {
            d.error(
                l.pos,
                format!(
                    "otlp.listen: invalid address {:?}; expected IP:PORT like 0.0.0.0:4318 (the OTLP/HTTP port)",
                    l.value
                ),
            );
            None
        }
    };
    if let (Some(a), Some(main)) = (at, listen)
        && a.port() != 0
        && a.port() == main.port()
        && (a.ip() == main.ip() || a.ip().is_unspecified() || main.ip().is_unspecified())
    {
        d.error(
            l.pos,
            format!(
                "otlp.listen ({a}) is the address of `listen` ({main}); give the receiver a port of its own, like 4318"
            ),
        );
    }
    let mut body_limit = DEFAULT_OTLP_BODY_LIMIT;
    if let Some(s) = &raw.value.body_limit {
        match parse_bytes(&s.value.0) {
            Ok(n) if n >= 1024 => body_limit = n,
            Ok(n) => d.error(
                s.pos,
                format!("otlp.body_limit is {n} bytes; one export of a single span needs more, give at least 1KiB"),
            ),
            Err(e) => d.error(s.pos, format!("otlp.body_limit: {e}")),
        }
    }
    let r = &raw.value;
    let raw_guards = RawGuards {
        max_connections: r.max_connections.as_ref(),
        header_read_timeout: r.header_read_timeout.as_ref(),
        idle_timeout: r.idle_timeout.as_ref(),
        body_read_timeout: r.body_read_timeout.as_ref(),
    };
    let guards = guards(d, raw_guards, "otlp", ListenerGuards::with_cap(DEFAULT_OTLP_MAX_CONNECTIONS));
    Some(OtlpConfig { listen: at?, body_limit, guards })
}

/// Reports a service name claimed twice. Two targets that both default to their (equal)
/// names are a duplicate target name, reported as such already.
fn service_names(d: &mut Diagnostics, targets: &[RawTarget]) {
    let mut seen: HashMap<&str, (bool, &str)> = HashMap::new();
    for t in targets {
        let (name, explicit, at): (&str, bool, Pos) = match &t.traces {
            Some(tr) => (tr.value.service_name.value.trim(), true, tr.value.service_name.pos),
            None => (t.name.value.trim(), false, t.name.pos),
        };
        if name.is_empty() {
            continue;
        }
        let owner = t.name.value.trim();
        match seen.get(name) {
            Some(&(earlier_explicit, earlier)) if explicit || earlier_explicit => d.error(
                at,
                format!(
                    "targets {earlier:?} and {owner:?} both take spans of service.name {name:?}; give each target its own traces.service_name"
                ),
            ),
            Some(_) => {}
            None => {
                seen.insert(name, (explicit, owner));
            }
        }
    }
}
