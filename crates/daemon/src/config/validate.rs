//! Meaning checks on a [`RawConfig`]: durations, sizes, URLs, ranges and references,
//! each error at the line and column of the value that causes it.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

use url::Url;

use super::bytes::parse_bytes;
use super::error::{ConfigErrors, Diagnostics, Pos};
use super::raw::{RawKv, RawScrape, RawServer, RawSlo, RawSpecDecode, RawTarget, S};
use super::types::{
    Cardinality, Config, DEFAULT_BODY_LIMIT, DEFAULT_LISTEN, DEFAULT_QUANTILES, DEFAULT_SCRAPE_INTERVAL,
    DEFAULT_SCRAPE_TIMEOUT, DEFAULT_TARGET_GRACE, DEFAULT_WINDOWS, Loaded, MIN_DEFAULT_EVALUATION_INTERVAL,
    ScrapeConfig, ServerConfig, Target,
};
use super::yaml::Read;
use crate::adapt::EngineHint;
use crate::canonical::Engine;
use crate::duration::{DurationError, Window, parse_duration, parse_interval, parse_positive_duration};
use crate::evaluate::KvThresholds;
use crate::slo::{Objective, Scope, Slo};

fn pos<T>(s: &S<T>) -> Pos {
    s.pos
}

pub(crate) fn validate(read: Read, file: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Loaded, ConfigErrors> {
    let Read { raw, errors, rejected, root, target_names, alerting_keys } = read;
    let mut d = Diagnostics::new(file, errors, rejected);

    let listen = match &raw.listen {
        None => DEFAULT_LISTEN.parse().ok(),
        Some(s) => match s.value.trim().parse::<SocketAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                d.error(
                    pos(s),
                    format!(
                        "invalid listen address {:?}; expected IP:PORT like 127.0.0.1:9464 or 0.0.0.0:9464",
                        s.value
                    ),
                );
                None
            }
        },
    };

    let external_labels = super::labels::external_labels_section(&mut d, raw.external_labels.as_ref(), env);
    let scrape = scrape_section(&mut d, raw.scrape.as_ref());
    let server = server_section(&mut d, raw.server.as_ref());
    let evaluation_interval = raw
        .evaluation_interval
        .as_ref()
        .and_then(|s| duration(&mut d, s, "evaluation_interval", parse_interval))
        .unwrap_or(scrape.interval.max(MIN_DEFAULT_EVALUATION_INTERVAL));

    let discovery = super::discovery::discovery_section(&mut d, raw.discovery.as_ref());
    let discovery_limits = super::discovery::limits_section(&mut d, raw.discovery_limits.as_ref());
    let targets = match &raw.targets {
        None if d.rejected(root, "targets") || d.rejected(root, "discovery") => Vec::new(),
        None if !discovery.is_empty() => Vec::new(),
        t => targets_section(&mut d, t.as_ref(), &scrape, listen, !discovery.is_empty()),
    };
    let windows = windows_section(&mut d, raw.windows.as_ref(), &targets);
    let quantiles = quantiles_section(&mut d, raw.quantiles.as_ref());
    // SLOs may name any target written in the file, even one with its own error, so
    // that one mistake is reported once.
    let names: Vec<&str> = target_names.iter().map(String::as_str).collect();
    let slos = slos_section(&mut d, raw.slos.as_deref().unwrap_or(&[]), &names);
    let slo_periods = super::budget::slo_periods(&mut d, raw.slos.as_deref().unwrap_or(&[]));
    let kv_cache = kv_section(&mut d, raw.kv_cache.as_ref());
    let alerting = super::alerting::alerting_section(&mut d, raw.alerting.as_ref(), &alerting_keys, &slos, &windows);
    let spec_draft_cost_ratio = spec_decode_section(&mut d, raw.spec_decode.as_ref());
    let otlp = super::otlp::otlp_section(&mut d, raw.otlp.as_ref(), listen, raw.targets.as_ref());
    let state = super::state::state_section(
        &mut d,
        raw.state_dir.as_ref(),
        raw.state_snapshot_interval.as_ref(),
        raw.state_max_size.as_ref(),
    );
    // `gpu` and `cost` check their values as they are read (src/gpu/config.rs).
    let gpu = raw.gpu.map(|g| g.value);
    let cost = raw.cost.map(|c| c.value);

    let (errors, warnings) = d.finish();
    let Some(listen) = listen.filter(|_| errors.is_empty()) else {
        return Err(ConfigErrors(errors));
    };
    let config = Config {
        listen,
        external_labels,
        evaluation_interval,
        scrape,
        server,
        targets,
        discovery,
        discovery_limits,
        windows,
        quantiles,
        slos,
        slo_periods,
        kv_cache,
        alerting,
        gpu,
        cost,
        spec_draft_cost_ratio,
        otlp,
        state,
    };
    Ok(Loaded { config, warnings })
}

/// Reads a duration with `parse` (one of `crate::duration`'s), reporting it under `key`.
fn duration(
    d: &mut Diagnostics,
    s: &S<String>,
    key: &str,
    parse: fn(&str) -> Result<Duration, DurationError>,
) -> Option<Duration> {
    parse(&s.value).map_err(|e| d.error(pos(s), format!("{key}: {e}"))).ok()
}

fn positive_duration(d: &mut Diagnostics, s: &S<String>, key: &str) -> Option<Duration> {
    duration(d, s, key, parse_positive_duration)
}

fn http_url(d: &mut Diagnostics, s: &S<String>, key: &str) -> Option<Url> {
    let expected = "expected an http:// or https:// URL like http://127.0.0.1:8000/metrics";
    match Url::parse(s.value.trim()) {
        Ok(u) if (u.scheme() == "http" || u.scheme() == "https") && u.host().is_some() => Some(u),
        Ok(u) => {
            let shown = crate::redact::url_str(&s.value);
            d.error(pos(s), format!("{key}: unsupported URL {shown:?} (scheme {:?}); {expected}", u.scheme()));
            None
        }
        Err(e) => {
            d.error(pos(s), format!("{key}: invalid URL {:?} ({e}); {expected}", crate::redact::url_str(&s.value)));
            None
        }
    }
}

fn scrape_section(d: &mut Diagnostics, raw: Option<&RawScrape>) -> ScrapeConfig {
    let mut out = ScrapeConfig {
        interval: DEFAULT_SCRAPE_INTERVAL,
        timeout: DEFAULT_SCRAPE_TIMEOUT,
        body_limit: DEFAULT_BODY_LIMIT,
        gzip: true,
        follow_redirects: true,
        cardinality: Cardinality::default(),
        target_grace: DEFAULT_TARGET_GRACE,
    };
    let Some(raw) = raw else { return out };
    if let Some(v) = raw.target_grace.as_ref().and_then(|s| duration(d, s, "scrape.target_grace", parse_duration)) {
        out.target_grace = v;
    }
    let interval = raw.interval.as_ref().map(|s| duration(d, s, "scrape.interval", parse_interval));
    if let Some(Some(v)) = interval {
        out.interval = v;
    }
    let timeout_set = raw.timeout.is_some();
    if let Some(v) = raw.timeout.as_ref().and_then(|s| positive_duration(d, s, "scrape.timeout")) {
        out.timeout = v;
    }
    // Against a rejected interval the comparison would only repeat that error.
    if out.timeout > out.interval && interval != Some(None) {
        if let Some(s) = &raw.timeout {
            d.error(
                pos(s),
                format!(
                    "scrape.timeout ({}) is longer than scrape.interval ({}); it must be at most the interval",
                    s.value,
                    crate::duration::format_duration(out.interval)
                ),
            );
        } else if !timeout_set {
            // Only the interval was shortened below the default timeout: follow it.
            out.timeout = out.interval;
        }
    }
    if let Some(s) = &raw.body_limit {
        match parse_bytes(&s.value.0) {
            Ok(n) => out.body_limit = n,
            Err(e) => d.error(pos(s), format!("scrape.body_limit: {e}")),
        }
    }
    if let Some(g) = raw.gzip {
        out.gzip = g;
    }
    if let Some(f) = raw.follow_redirects {
        out.follow_redirects = f;
    }
    out.cardinality = cardinality(d, raw.max_models.as_ref(), raw.max_series.as_ref(), "scrape.", out.cardinality);
    out
}

fn server_section(d: &mut Diagnostics, raw: Option<&RawServer>) -> ServerConfig {
    let mut out = ServerConfig::default();
    let Some(raw) = raw else { return out };
    if let Some(s) = &raw.max_connections {
        match usize::try_from(s.value) {
            Ok(n) if n >= 1 => out.max_connections = n,
            _ => d.error(pos(s), format!("server.max_connections must be at least 1, got {}", s.value)),
        }
    }
    if let Some(v) =
        raw.header_read_timeout.as_ref().and_then(|s| positive_duration(d, s, "server.header_read_timeout"))
    {
        out.header_read_timeout = v;
    }
    if let Some(v) = raw.idle_timeout.as_ref().and_then(|s| positive_duration(d, s, "server.idle_timeout")) {
        out.idle_timeout = v;
    }
    out
}

/// `max_models` and `max_series` over `base`; each at least 1 (0 would refuse every scrape).
fn cardinality(
    d: &mut Diagnostics,
    max_models: Option<&S<u64>>,
    max_series: Option<&S<u64>>,
    prefix: &str,
    base: Cardinality,
) -> Cardinality {
    let mut limit = |s: Option<&S<u64>>, key: &str, default: usize| match s {
        None => default,
        Some(s) if s.value == 0 => {
            d.error(pos(s), format!("{prefix}{key} is 0, which would refuse every scrape; give a limit of at least 1"));
            default
        }
        Some(s) => usize::try_from(s.value).unwrap_or(usize::MAX),
    };
    Cardinality {
        max_models: limit(max_models, "max_models", base.max_models),
        max_series: limit(max_series, "max_series", base.max_series),
    }
}

fn targets_section(
    d: &mut Diagnostics,
    raw: Option<&S<Vec<RawTarget>>>,
    scrape: &ScrapeConfig,
    listen: Option<SocketAddr>,
    discovered: bool,
) -> Vec<Target> {
    let Some(raw) = raw else {
        d.error(
            Pos::FILE,
            "no targets: add a `targets:` list with at least one {name, url} entry, or a `discovery:` source",
        );
        return Vec::new();
    };
    if raw.value.is_empty() && !discovered && !d.rejected(pos(raw), "[]") {
        d.error(pos(raw), "targets is empty; add at least one {name, url} entry or a `discovery:` source");
    }
    let mut seen: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    for t in &raw.value {
        let name = t.name.value.trim();
        if name.is_empty() {
            d.error(pos(&t.name), "target name is empty; give each target a unique name");
        } else if !seen.insert(name) {
            d.error(pos(&t.name), format!("duplicate target name {name:?}; target names must be unique"));
        }
        if let Some(target) = target(d, t, scrape) {
            out.push(target);
        }
    }
    super::tap::distinct_addresses(d, &raw.value, &out, listen);
    out
}

fn target(d: &mut Diagnostics, t: &RawTarget, scrape: &ScrapeConfig) -> Option<Target> {
    let name = t.name.value.trim().to_string();
    let url = http_url(d, &t.url, "url");
    let engine = match &t.engine {
        None => Some(EngineHint::Auto),
        Some(s) if s.value.trim() == "auto" => Some(EngineHint::Auto),
        Some(s) => match Engine::parse(s.value.trim()) {
            Some(e) => Some(EngineHint::Is(e)),
            None => {
                let names: Vec<&str> = Engine::ALL.iter().map(|e| e.as_str()).collect();
                d.error(pos(s), format!("unknown engine {:?}; expected one of auto, {}", s.value, names.join(", ")));
                None
            }
        },
    };
    let model = match &t.model {
        Some(m) if m.value.trim().is_empty() => {
            d.error(pos(m), "model is empty; remove the key or name the model");
            name.clone()
        }
        Some(m) => m.value.trim().to_string(),
        None => name.clone(),
    };
    let bearer_token_file = t.bearer_token_file.as_ref().map(|s| {
        if s.value.trim().is_empty() {
            d.error(pos(s), "bearer_token_file is empty; give the path of a file that holds the token");
        }
        std::path::PathBuf::from(s.value.trim())
    });
    let mut headers = Vec::new();
    for (k, v) in t.headers.iter().flatten() {
        if reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err() {
            d.error(pos(v), format!("invalid HTTP header name {k:?}; use letters, digits and '-'"));
            continue;
        }
        if reqwest::header::HeaderValue::from_str(&v.value).is_err() {
            d.error(
                pos(v),
                format!("invalid value for header {k:?}: control characters and non-ASCII text are not allowed"),
            );
            continue;
        }
        if k.eq_ignore_ascii_case("authorization") && t.bearer_token_file.is_some() {
            d.error(pos(v), "headers.Authorization and bearer_token_file both set the Authorization header; keep one");
            continue;
        }
        headers.push((k.clone(), v.value.clone().into()));
    }
    let interval = match &t.interval {
        Some(s) => duration(d, s, "interval", parse_interval)?,
        None => scrape.interval,
    };
    let timeout = match &t.timeout {
        Some(s) => positive_duration(d, s, "timeout")?,
        None => scrape.timeout.min(interval),
    };
    if timeout > interval {
        let at = t.timeout.as_ref().or(t.interval.as_ref()).map(pos).unwrap_or(pos(&t.name));
        d.error(
            at,
            format!(
                "target {name:?}: timeout ({}) is longer than its interval ({}); it must be at most the interval",
                crate::duration::format_duration(timeout),
                crate::duration::format_duration(interval)
            ),
        );
    }
    let follow_redirects = t.follow_redirects.unwrap_or(scrape.follow_redirects);
    let cardinality = cardinality(d, t.max_models.as_ref(), t.max_series.as_ref(), "", scrape.cardinality);
    let traces = super::otlp::target_traces(d, t.traces.as_ref());
    let tap = match &t.tap {
        None => None,
        Some(raw) => Some(super::tap::tap(d, raw, &name, url.as_ref())?),
    };
    Some(Target {
        name,
        url: url?,
        engine: engine?,
        model,
        bearer_token_file,
        headers,
        interval,
        timeout,
        follow_redirects,
        cardinality,
        traces,
        tap,
    })
}

fn windows_section(d: &mut Diagnostics, raw: Option<&S<Vec<S<String>>>>, targets: &[Target]) -> Vec<Window> {
    let Some(raw) = raw else {
        return DEFAULT_WINDOWS.iter().filter_map(|s| parse_duration(s).ok().and_then(Window::new)).collect();
    };
    if raw.value.is_empty() && !d.rejected(pos(raw), "[]") {
        d.error(pos(raw), "windows is empty; list at least one, e.g. [1m, 5m, 15m, 1h]");
    }
    let mut out: Vec<Window> = Vec::new();
    let slowest = targets.iter().map(|t| t.interval).max();
    for s in &raw.value {
        let Some(w) = positive_duration(d, s, "window").and_then(Window::new) else {
            continue;
        };
        if out.contains(&w) {
            d.error(pos(s), format!("duplicate window {}", s.value));
            continue;
        }
        if let Some(iv) = slowest
            && w.duration() < iv * 2
        {
            d.warn(pos(s), format!(
                "window {} holds fewer than two scrapes at the slowest interval ({}); its rates and quantiles will mostly be empty",
                s.value,
                crate::duration::format_duration(iv)
            ));
        }
        out.push(w);
    }
    out.sort();
    out
}

fn quantiles_section(d: &mut Diagnostics, raw: Option<&S<Vec<S<f64>>>>) -> Vec<f64> {
    let Some(raw) = raw else {
        return DEFAULT_QUANTILES.to_vec();
    };
    if raw.value.is_empty() && !d.rejected(pos(raw), "[]") {
        d.error(pos(raw), "quantiles is empty; list at least one, e.g. [0.5, 0.9, 0.95, 0.99]");
    }
    let mut out: Vec<f64> = Vec::new();
    for q in &raw.value {
        if !(q.value > 0.0 && q.value < 1.0) {
            d.error(
                pos(q),
                format!("quantile {} is out of range; expected a number strictly between 0 and 1, like 0.99", q.value),
            );
        } else if out.contains(&q.value) {
            d.error(pos(q), format!("duplicate quantile {}", q.value));
        } else {
            out.push(q.value);
        }
    }
    out.sort_by(f64::total_cmp);
    out
}

fn slos_section(d: &mut Diagnostics, raw: &[S<RawSlo>], targets: &[&str]) -> Vec<Slo> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for slo in raw {
        let (s, at): (&RawSlo, Pos) = (&slo.value, slo.pos);
        let name = s.name.value.trim().to_string();
        if name.is_empty() {
            d.error(pos(&s.name), "slo name is empty; give each SLO a unique name");
        } else if !seen.insert(name.clone()) {
            d.error(pos(&s.name), format!("duplicate slo name {name:?}; SLO names must be unique"));
        }
        let clause = |d: &mut Diagnostics, v: &Option<S<String>>, key: &str| {
            v.as_ref().and_then(|v| positive_duration(d, v, key))
        };
        let (ttft, tpot, e2e) = (clause(d, &s.ttft, "ttft"), clause(d, &s.tpot, "tpot"), clause(d, &s.e2e, "e2e"));
        let written = |key| d.rejected(at, key);
        if s.ttft.is_none() && s.tpot.is_none() && s.e2e.is_none() && !["ttft", "tpot", "e2e"].into_iter().any(written)
        {
            d.error(pos(&s.name), format!("slo {name:?} has no clause; set at least one of ttft, tpot, e2e"));
        }
        let objective = match &s.objective {
            None if d.rejected(at, "objective") => None,
            None => {
                d.error(pos(&s.name), format!("slo {name:?} has no objective; add e.g. objective: 0.99"));
                None
            }
            Some(o) => {
                let ok = Objective::new(o.value);
                if ok.is_none() {
                    d.error(
                        pos(o),
                        format!(
                            "objective {} is out of range; expected a share strictly between 0 and 1, like 0.99",
                            o.value
                        ),
                    );
                }
                ok
            }
        };
        let mut slo_targets = Vec::new();
        for t in s.targets.iter().flatten() {
            if targets.contains(&t.value.trim()) {
                slo_targets.push(t.value.trim().to_string());
            } else {
                d.error(
                    pos(t),
                    format!("slo {name:?} names unknown target {:?}; expected one of {}", t.value, targets.join(", ")),
                );
            }
        }
        let models = s.models.iter().flatten().map(|m| m.value.trim().to_string()).collect();
        // An SLO without a valid objective has an error already, so the config is rejected.
        if let Some(objective) = objective {
            out.push(Slo { name, ttft, tpot, e2e, objective, scope: Scope { targets: slo_targets, models } });
        }
    }
    out
}

fn kv_section(d: &mut Diagnostics, raw: Option<&RawKv>) -> KvThresholds {
    let mut kv = KvThresholds::default();
    let Some(raw) = raw else { return kv };
    let fields: [(&str, &Option<S<f64>>, &mut f64); 4] = [
        ("underloaded", &raw.underloaded, &mut kv.underloaded),
        ("target_low", &raw.target_low, &mut kv.target_low),
        ("target_high", &raw.target_high, &mut kv.target_high),
        ("critical", &raw.critical, &mut kv.critical),
    ];
    let mut ok = true;
    let mut at = [Pos::FILE; 4];
    for (i, (key, v, slot)) in fields.into_iter().enumerate() {
        if let Some(v) = v {
            at[i] = pos(v);
            if !(0.0..=1.0).contains(&v.value) {
                d.error(pos(v), format!("kv_cache.{key} is {}; expected a ratio between 0 and 1, like 0.85", v.value));
                ok = false;
            } else {
                *slot = v.value;
            }
        }
    }
    if ok {
        let vals = [kv.underloaded, kv.target_low, kv.target_high, kv.critical];
        let keys = ["underloaded", "target_low", "target_high", "critical"];
        for i in 0..3 {
            if vals[i] > vals[i + 1] || (i == 1 && vals[1] >= vals[2]) {
                // Point at whichever of the pair the user wrote (the later one if both).
                let p = if at[i + 1] != Pos::FILE { at[i + 1] } else { at[i] };
                d.error(p, format!(
                    "kv_cache thresholds out of order: {} ({}) must be {} {} ({}); expected underloaded ≤ target_low < target_high ≤ critical",
                    keys[i], vals[i], if i == 1 { "below" } else { "at most" }, keys[i + 1], vals[i + 1]
                ));
            }
        }
    }
    kv
}

fn spec_decode_section(d: &mut Diagnostics, raw: Option<&RawSpecDecode>) -> Option<f64> {
    let r = raw?.draft_cost_ratio.as_ref()?;
    if !(r.value.is_finite() && r.value >= 0.0) {
        d.error(
            pos(r),
            format!(
                "draft_cost_ratio is {}; write the draft model's step cost as a share of the target's, e.g. 0.1",
                r.value
            ),
        );
        return None;
    }
    Some(r.value)
}
