//! What reloading one config over another changes, and what each change does to the
//! daemon's state (docs/discovery.md#what-a-reload-changed).
//!
//! Both sides are compared in normal form ([`super::normal`]), so the daemon's reload log
//! line and `goodput check --against` (which has only the running daemon's normal form)
//! say the same thing. Each [`Change`] is one subject: a top-level key, or one named thing
//! in it (`slos[fast]`, `targets[llama]`, `alerting.rules[LLMTargetDown]`), with the values
//! that changed and what the reload does about it. The effects are the rules the daemon's
//! reload follows (crates/daemon/src/daemon/reload.rs); docs/config.md lists them per key.

use std::fmt;

use serde_json::Value;

use super::normal::{Normal, SECTIONS, normalize};
use super::types::Config;

/// One changed subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `scrape`, `slos[fast]`, `alerting.rules[LLMTargetDown]`, …
    pub subject: String,
    /// What changed in it: `ttft 200ms → 250ms`, `added`, `removed`.
    pub details: Vec<String>,
    /// What the reload does to state for it.
    pub effect: String,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.subject, self.details.join(", "), self.effect)
    }
}

/// A value as a change shows it: strings bare, `none` for absent, lists in brackets.
fn show(v: &Value) -> String {
    match v {
        Value::Null => "none".to_string(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(show).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}

/// Each leaf that differs between `old` and `new`, as `path old → new`.
fn leaves(path: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    if old == new {
        return;
    }
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                leaves(&p, o.get(k).unwrap_or(&Value::Null), n.get(k).unwrap_or(&Value::Null), out);
            }
        }
        _ => {
            let what = format!("{} → {}", show(old), show(new));
            out.push(if path.is_empty() { what } else { format!("{path} {what}") });
        }
    }
}

/// The changes from `old` to `new`, in the order of [`SECTIONS`].
pub fn between(old: &Normal, new: &Normal) -> Vec<Change> {
    let mut out = Vec::new();
    for key in SECTIONS {
        let (o, n) = (old.section(key), new.section(key));
        if o == n {
            continue;
        }
        match *key {
            "targets" => named(key, o, n, &mut out, |name, o, n| target_effect(name, o, n, new)),
            "slos" => named(key, o, n, &mut out, slo_effect),
            "alerting" => alerting(o, n, &mut out),
            _ => {
                let mut details = Vec::new();
                leaves("", o, n, &mut details);
                let effect = section_effect(key, o, n, new);
                out.push(Change { subject: key.to_string(), details, effect });
            }
        }
    }
    out
}

/// [`between`] two configs, plus what the normal form cannot show: a changed credential
/// (a header value, a URL's password or token) of a target or an alert destination.
pub fn between_configs(old: &Config, new: &Config) -> Vec<Change> {
    let (o, n) = (normalize(old), normalize(new));
    let mut out = between(&o, &n);
    for t in &new.targets {
        let Some(was) = old.targets.iter().find(|w| w.name == t.name) else { continue };
        let shown_alike = o.section("targets")[&t.name] == n.section("targets")[&t.name];
        if was != t && shown_alike {
            out.push(Change {
                subject: format!("targets[{}]", t.name),
                details: vec!["a credential (not shown)".to_string()],
                effect: "keeps its windows; scraped with the new credential".to_string(),
            });
        }
    }
    let destinations = |c: &Config| (c.alerting.alertmanager_urls(), c.alerting.webhook.clone());
    if destinations(old) != destinations(new) && o.section("alerting") == n.section("alerting") {
        out.push(Change {
            subject: "alerting".to_string(),
            details: vec!["a destination's credential (not shown)".to_string()],
            effect: DELIVERY.to_string(),
        });
    }
    out
}

/// A keyed section (`targets`, `slos`): one change per name added, removed or changed.
fn named(key: &str, old: &Value, new: &Value, out: &mut Vec<Change>, effect: impl Fn(&str, &Value, &Value) -> String) {
    let empty = serde_json::Map::new();
    let (o, n) = (old.as_object().unwrap_or(&empty), new.as_object().unwrap_or(&empty));
    // By name, the removed ones after the others.
    for (name, nv) in n {
        let ov = o.get(name).unwrap_or(&Value::Null);
        if ov == nv {
            continue;
        }
        let details = if ov.is_null() {
            vec!["added".to_string()]
        } else {
            let mut d = Vec::new();
            leaves("", ov, nv, &mut d);
            d
        };
        out.push(Change { subject: format!("{key}[{name}]"), details, effect: effect(name, ov, nv) });
    }
    for (name, ov) in o.iter().filter(|(name, _)| !n.contains_key(*name)) {
        out.push(Change {
            subject: format!("{key}[{name}]"),
            details: vec!["removed".to_string()],
            effect: effect(name, ov, &Value::Null),
        });
    }
}

/// Whether two targets in normal form scrape the same source: the same URL (credentials
/// aside), engine and model. Only then does a target keep its windows across a change.
pub fn same_source(old: &Value, new: &Value) -> bool {
    ["url", "engine", "model"].iter().all(|k| old[k] == new[k])
}

fn target_effect(name: &str, old: &Value, new: &Value, config: &Normal) -> String {
    if old.is_null() {
        return "scraped from now on".to_string();
    }
    if new.is_null() {
        let grace = show(&config.section("scrape")["target_grace"]);
        return format!(
            "no longer scraped; keeps its windows, results and alerts for scrape.target_grace ({grace}) in case it comes back"
        );
    }
    let mut said = Vec::new();
    if !same_source(old, new) {
        said.push("a different source (url, engine or model): starts with empty windows".to_string());
    } else if ["interval", "timeout", "follow_redirects", "max_models", "max_series", "headers", "bearer_token_file"]
        .iter()
        .any(|k| old[k] != new[k])
    {
        said.push("keeps its windows and every scrape held; scraped with the new settings".to_string());
    }
    match (&old["tap"], &new["tap"]) {
        (o, n) if o == n => {}
        (Value::Null, n) => said.push(format!("its tap starts on {}", show(&n["listen"]))),
        (_, Value::Null) => said.push("its tap stops; requests in progress finish".to_string()),
        (o, n) if o["listen"] != n["listen"] => said
            .push(format!("its tap moves to {}; requests in progress finish on the old address", show(&n["listen"]))),
        _ => {
            said.push("its tap restarts on the same socket; requests in progress finish under the old settings".into())
        }
    }
    if old["traces"] != new["traces"] && !config.section("otlp").is_null() {
        said.push(format!("OTLP spans of {name} are matched by the new service name"));
    }
    said.join("; ")
}

fn slo_effect(_: &str, old: &Value, new: &Value) -> String {
    if old.is_null() {
        return "evaluated from the next tick over every scrape and request held; its error budget starts counting now"
            .to_string();
    }
    if new.is_null() {
        return "no longer evaluated; its error budget is dropped and its firing alerts resolved".to_string();
    }
    let mut alike = old.clone();
    alike["objective"] = new["objective"].clone();
    let budget = if alike == *new {
        "its error budget keeps every count, read against the new objective"
    } else {
        "its error-budget period restarts (what was counted was judged against the old definition)"
    };
    format!(
        "re-evaluated from the next tick over every scrape and request held; {budget}; its alerts start afresh (a firing one is resolved once)"
    )
}

/// The keys of `alerting` that set where and how notifications go.
pub const DELIVERY_KEYS: &[&str] = &["alertmanagers", "webhook", "resend_interval", "timeout", "queue_capacity"];

const DELIVERY: &str = "alert delivery restarts with the new destinations and settings: firing alerts are sent again from the next tick, and what was queued for the old ones gets up to 3 s to go out";

fn alerting(old: &Value, new: &Value, out: &mut Vec<Change>) {
    let mut details = Vec::new();
    let mut effects = Vec::new();
    for key in DELIVERY_KEYS.iter().chain(&["runbook_url", "min_window_coverage"]) {
        leaves(key, &old[*key], &new[*key], &mut details);
    }
    if DELIVERY_KEYS.iter().any(|k| old[*k] != new[*k]) {
        effects.push(DELIVERY);
    }
    if old["runbook_url"] != new["runbook_url"] {
        effects.push("alerts link to the new runbooks from the next tick");
    }
    if old["min_window_coverage"] != new["min_window_coverage"] {
        effects.push("the rules reading windows changed with it (below)");
    }
    if !details.is_empty() {
        out.push(Change { subject: "alerting".to_string(), details, effect: effects.join("; ") });
    }
    let empty = serde_json::Map::new();
    let (o, n) = (old["rules"].as_object().unwrap_or(&empty), new["rules"].as_object().unwrap_or(&empty));
    for (name, nv) in n {
        let ov = o.get(name).unwrap_or(&Value::Null);
        if ov == nv {
            continue;
        }
        let mut d = Vec::new();
        leaves("", ov, nv, &mut d);
        let effect = if *nv == "disabled" {
            "no longer judged; its firing alerts are resolved once"
        } else if *ov == "disabled" {
            "judged from the next tick"
        } else {
            "its alerts start afresh under the new definition (a firing one is resolved once)"
        };
        out.push(Change { subject: format!("alerting.rules[{name}]"), details: d, effect: effect.to_string() });
    }
}

fn section_effect(key: &str, old: &Value, new: &Value, config: &Normal) -> String {
    let s = match key {
        "listen" => {
            "the status page, /metrics and the API move to the new address; requests in progress on the old one finish"
        }
        "external_labels" => {
            "every series and alert carries the new labels from the next tick; firing alerts are resolved under the old labels and sent again under the new"
        }
        "evaluation_interval" => {
            "the next tick comes one new interval from now; windows, results and alert states are kept"
        }
        "scrape" => {
            return if old["target_grace"] != new["target_grace"] && {
                let (mut a, mut b) = (old.clone(), new.clone());
                a["target_grace"] = Value::Null;
                b["target_grace"] = Value::Null;
                a == b
            } {
                "applies to targets that leave from now on".to_string()
            } else {
                "every target keeps its windows and every scrape held; scraped with the new settings from now on"
                    .to_string()
            };
        }
        "server" => {
            "new connections are served under the new limits on the same socket; open connections finish their request under the old"
        }
        "discovery" => {
            "sources whose settings did not change keep running and what they found; the others stop or start, and targets no longer found wait out scrape.target_grace"
        }
        "discovery_limits" => {
            "applies from the next reconcile: discovered targets past the limit are refused, those within it admitted"
        }
        "windows" => {
            "a new window is evaluated from the next tick over the scrapes already held; a removed one is no longer exported; each store keeps what the longest window evaluated reads"
        }
        "quantiles" => "exported from the next tick, computed over the scrapes held",
        "kv_cache" => {
            "bands evaluated from the next tick over the scrapes held; the capacity estimate starts afresh when critical changed"
        }
        "gpu" => "the GPU sources restart with the new settings",
        "cost" | "spec_decode" => "derived from the next tick",
        "otlp" => {
            return match (old.is_null(), new.is_null()) {
                (true, _) => format!("the OTLP receiver starts on {}", show(&new["listen"])),
                (_, true) => "the OTLP receiver stops; exports in progress finish".to_string(),
                _ if old["listen"] != new["listen"] => format!(
                    "the OTLP receiver moves to {}; exports in progress finish on the old address",
                    show(&new["listen"])
                ),
                _ => "the OTLP receiver restarts on the same socket; exports in progress finish under the old settings"
                    .to_string(),
            };
        }
        "state_dir" => {
            return if new.is_null() {
                "no more snapshots; the last one stays where it is".to_string()
            } else {
                format!(
                    "the next snapshot goes to {} (every {}); nothing is read from there",
                    show(new),
                    show(config.section("state_snapshot_interval"))
                )
            };
        }
        "state_snapshot_interval" | "state_max_size" => "applies to the next snapshot",
        _ => "applied from the next tick",
    };
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        super::super::from_str(text, "t.yaml").expect("valid").config
    }

    const BASE: &str = "scrape: {interval: 2s}\n\
        targets:\n  - {name: a, url: 'http://127.0.0.1:8000/metrics', headers: {X-Api-Key: one}}\n\
        slos:\n  - {name: fast, ttft: 200ms, objective: 0.99}\n  - {name: slow, ttft: 2s, objective: 0.9}\n";

    fn subjects(c: &[Change]) -> Vec<&str> {
        c.iter().map(|c| c.subject.as_str()).collect()
    }

    #[test]
    fn nothing_changes_between_equal_configs() {
        assert!(between_configs(&config(BASE), &config(BASE)).is_empty());
    }

    #[test]
    fn each_subject_says_what_changed_and_what_it_does() {
        let new = BASE
            .replace("interval: 2s", "interval: 3s")
            .replace("ttft: 200ms, objective: 0.99", "ttft: 250ms, objective: 0.95")
            .replace("ttft: 2s, objective: 0.9", "ttft: 2s, objective: 0.8")
            + "  - {name: new, e2e: 10s, objective: 0.9}\nalerting:\n  rules:\n    LLMTargetDown: {for: 2m}\n";
        let c = between_configs(&config(BASE), &config(&new));
        assert_eq!(
            subjects(&c),
            ["scrape", "targets[a]", "slos[fast]", "slos[new]", "slos[slow]", "alerting.rules[LLMTargetDown]"]
        );
        assert_eq!(c[0].details, ["interval 2s → 3s", "timeout 2s → 3s"]);
        assert!(c[0].effect.contains("keeps its windows"), "{}", c[0]);
        // The target's own interval follows scrape.interval.
        assert!(c[1].details.contains(&"interval 2s → 3s".to_string()), "{}", c[1]);
        assert!(c[1].effect.starts_with("keeps its windows"), "{}", c[1]);
        assert_eq!(c[2].details, ["objective 0.99 → 0.95", "ttft 200ms → 250ms"]);
        assert!(c[2].effect.contains("period restarts"), "{}", c[2]);
        assert_eq!(c[3].details, ["added"]);
        assert!(c[4].effect.contains("keeps every count"), "{}", c[4]);
        assert!(c[5].details.contains(&"for 1m → 2m".to_string()), "{}", c[5]);
    }

    #[test]
    fn a_credential_alone_is_named_but_not_shown_and_a_new_url_is_a_new_source() {
        let c = between_configs(&config(BASE), &config(&BASE.replace("X-Api-Key: one", "X-Api-Key: two")));
        assert_eq!(subjects(&c), ["targets[a]"]);
        assert_eq!(c[0].details, ["a credential (not shown)"]);
        assert!(!c[0].to_string().contains("two"));

        let c = between_configs(&config(BASE), &config(&BASE.replace(":8000", ":8001")));
        assert!(c[0].effect.contains("starts with empty windows"), "{}", c[0]);
        let removed = between_configs(&config(BASE), &config(&BASE.replace("name: a,", "name: b,")));
        assert_eq!(subjects(&removed), ["targets[b]", "targets[a]"]);
        assert!(removed[1].effect.contains("target_grace (10m)"), "{}", removed[1]);
    }
}
