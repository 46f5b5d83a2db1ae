//! The alert state machine, with Prometheus's semantics: inactive → pending → firing →
//! resolved, driven by an injected clock.
//!
//! A condition that starts holding becomes *pending* at that tick (`activeAt`); once it has
//! held for `for` it is *firing* (with `for: 0s`, at the same tick). A pending alert whose
//! condition stops holding is dropped silently; a firing one is *resolved* and one resolution
//! is handed to delivery. Firing alerts are handed to delivery again every resend interval.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Serialize;

use super::input::AlertInput;
use super::rule::{AlertName, RuleSet, conditions, readiness};
use crate::report::RuleReadiness;

/// A stable identity for a label set, as Alertmanager would group it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Fingerprint(pub String);

impl Fingerprint {
    /// FNV-1a over `name\xffvalue\xff` pairs in label order, as 16 hex digits.
    pub fn of(labels: &BTreeMap<String, String>) -> Fingerprint {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (k, v) in labels {
            for b in k.bytes().chain([0xff]).chain(v.bytes()).chain([0xff]) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        Fingerprint(format!("{h:016x}"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AlertState {
    Pending,
    Firing,
}

impl AlertState {
    pub fn as_str(self) -> &'static str {
        match self {
            AlertState::Pending => "pending",
            AlertState::Firing => "firing",
        }
    }
}

/// An alert that is pending or firing.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveAlert {
    pub name: AlertName,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub value: f64,
    pub state: AlertState,
    /// When the condition started holding, Unix ms.
    pub active_at_ms: i64,
    pub fired_at_ms: Option<i64>,
    /// When delivery last got this alert, Unix ms.
    pub(super) last_sent_ms: Option<i64>,
    /// Restored from a snapshot and not judged since: kept as it was until its target is up
    /// and its rule ready to judge it (super::saved).
    pub(super) restored: bool,
}

/// An alert handed to delivery: firing (no end) or resolved (with its end).
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub fingerprint: Fingerprint,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub starts_at_ms: i64,
    /// `Some` once resolved.
    pub ends_at_ms: Option<i64>,
}

/// Evaluates the rules every tick and remembers each alert's state between ticks.
#[derive(Debug, Clone)]
pub struct AlertEngine {
    pub(super) rules: RuleSet,
    /// Where each alert's `runbook_url` points ([`super::config::AlertingConfig::runbook_page`]);
    /// `None` leaves the annotation out.
    pub(super) runbook_page: Option<String>,
    pub(super) resend_interval: Duration,
    pub(super) active: BTreeMap<Fingerprint, ActiveAlert>,
    /// Rule and input pairs judged and alerts visited by the evaluations so far: the work
    /// of its ticks, counted rather than timed.
    pub(super) work: u64,
}

impl AlertEngine {
    /// The SLO rules judge the SLOs each [`AlertInput`] carries, so the engine holds none.
    pub fn new(rules: RuleSet, runbook_page: Option<String>, resend_interval: Duration) -> Self {
        AlertEngine { rules, runbook_page, resend_interval, active: BTreeMap::new(), work: 0 }
    }

    /// One evaluation at `now_ms`; returns what delivery should send now.
    pub fn evaluate(&mut self, now_ms: i64, inputs: &[AlertInput]) -> Vec<Notification> {
        let holding = conditions(&self.rules, inputs, self.runbook_page.as_deref());
        self.work += (self.rules.rules.len() * inputs.len() + holding.len()) as u64;
        let mut seen = BTreeMap::new();
        for c in holding {
            let fp = Fingerprint::of(&c.labels);
            let a = self.active.entry(fp.clone()).or_insert_with(|| ActiveAlert {
                name: c.name,
                labels: c.labels.clone(),
                annotations: BTreeMap::new(),
                value: c.value,
                state: AlertState::Pending,
                active_at_ms: now_ms,
                fired_at_ms: None,
                last_sent_ms: None,
                restored: false,
            });
            a.restored = false;
            a.annotations = c.annotations;
            a.value = c.value;
            if a.state == AlertState::Pending && now_ms - a.active_at_ms >= c.for_.as_millis() as i64 {
                a.state = AlertState::Firing;
                a.fired_at_ms = Some(now_ms);
            }
            seen.insert(fp, ());
        }
        let mut out = Vec::new();
        let resend_ms = self.resend_interval.as_millis() as i64;
        let rules = &self.rules;
        // Restored alerts look their target and model up: by a search of every input, that
        // would be quadratic in the fleet after a restart.
        let by_key: HashMap<(&str, &str), Vec<&AlertInput>> = if self.active.values().any(|a| a.restored) {
            inputs.iter().fold(HashMap::new(), |mut m, i| {
                m.entry((i.target.as_str(), i.model.as_str())).or_default().push(i);
                m
            })
        } else {
            HashMap::new()
        };
        self.work += self.active.len() as u64;
        self.active.retain(|fp, a| {
            if seen.contains_key(fp) {
                let due = a.last_sent_ms.is_none_or(|t| now_ms - t >= resend_ms);
                if a.state == AlertState::Firing && due {
                    a.last_sent_ms = Some(now_ms);
                    out.push(notification(fp, a, None));
                }
                return true;
            }
            // A restored alert whose target is not up yet, or whose rule cannot judge yet,
            // has not been found false: resolving it now would tell Alertmanager so.
            if a.restored && !judged(rules, a, &by_key) {
                return true;
            }
            if a.state == AlertState::Firing {
                out.push(notification(fp, a, Some(now_ms)));
            }
            false
        });
        out
    }

    /// Per rule, target and model that is up, and window the rule reads: whether the window
    /// is covered enough for the rule to judge it. Rules that are not ready stay quiet.
    pub fn readiness(&self, inputs: &[AlertInput]) -> Vec<RuleReadiness> {
        readiness(&self.rules, inputs)
    }

    /// Rule and input pairs judged, conditions held and alerts visited by every evaluation
    /// so far.
    pub fn work(&self) -> u64 {
        self.work
    }

    /// Pending and firing alerts, in fingerprint order.
    pub fn active(&self) -> impl Iterator<Item = &ActiveAlert> {
        self.active.values()
    }
}

/// Whether this tick's inputs can judge `a`: its target and model are up and its rule has
/// the window coverage it needs.
fn judged(rules: &RuleSet, a: &ActiveAlert, inputs: &HashMap<(&str, &str), Vec<&AlertInput>>) -> bool {
    let Some(rule) = rules.rules.iter().find(|r| r.name == a.name) else { return true };
    let Some(target) = a.labels.get("target") else { return false };
    let model = a.labels.get("model").map_or("", String::as_str);
    inputs.get(&(target.as_str(), model)).is_some_and(|found| found.iter().any(|i| i.up && rule.ready_for(i)))
}

fn notification(fp: &Fingerprint, a: &ActiveAlert, ends_at_ms: Option<i64>) -> Notification {
    Notification {
        fingerprint: fp.clone(),
        labels: a.labels.clone(),
        annotations: a.annotations.clone(),
        starts_at_ms: a.active_at_ms,
        ends_at_ms,
    }
}
