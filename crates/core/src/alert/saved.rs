//! Alert states as a `state_dir` snapshot keeps them (docs/alerts.md#after-a-restart):
//! pending since, firing since, last sent.
//!
//! Without them a restart forgets every alert: Alertmanager is sent a "resolved" and, once
//! `for` has passed again, a new "firing". A restored alert keeps its `activeAt` (the
//! `startsAt` Alertmanager groups by) and when it was last sent, so it is resent on the
//! usual schedule and never announced as new. Until its target is up and its rule can
//! judge it again, it is held as it was rather than resolved.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::input::AlertInput;
use super::kind::{AlertName, Rule, RuleSet};
use super::state::{ActiveAlert, AlertEngine, AlertState, Fingerprint};

/// One pending or firing alert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedAlert {
    /// The `alertname` label.
    pub alertname: String,
    /// The rule's definition when the alert was saved; a changed rule starts afresh.
    pub rule: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub value: f64,
    pub firing: bool,
    pub active_at_ms: i64,
    pub fired_at_ms: Option<i64>,
    pub last_sent_ms: Option<i64>,
}

/// A rule's definition as a snapshot compares it.
fn definition(rule: &Rule) -> String {
    format!("{rule:?}")
}

fn rule_of<'a>(rules: &'a RuleSet, name: AlertName) -> Option<&'a Rule> {
    rules.rules.iter().find(|r| r.name == name)
}

/// Whether this tick's inputs can judge `a`: its target and model are up and its rule has
/// the window coverage it needs.
pub(super) fn judged(rules: &RuleSet, a: &ActiveAlert, inputs: &[AlertInput]) -> bool {
    let Some(rule) = rule_of(rules, a.name) else { return true };
    let (target, model) = (a.labels.get("target"), a.labels.get("model").map(String::as_str).unwrap_or(""));
    inputs
        .iter()
        .filter(|i| Some(&i.target) == target && i.model == model)
        .any(|i| i.up && rule.ready_for(i))
}

impl AlertEngine {
    /// Every pending and firing alert whose `target` label satisfies `keep`.
    pub fn saved(&self, keep: impl Fn(&str) -> bool) -> Vec<SavedAlert> {
        self.active
            .values()
            .filter(|a| a.labels.get("target").is_some_and(|t| keep(t)))
            .filter_map(|a| {
                let rule = rule_of(&self.rules, a.name)?;
                Some(SavedAlert {
                    alertname: a.name.as_str().to_string(),
                    rule: definition(rule),
                    labels: a.labels.clone(),
                    annotations: a.annotations.clone(),
                    value: a.value,
                    firing: a.state == AlertState::Firing,
                    active_at_ms: a.active_at_ms,
                    fired_at_ms: a.fired_at_ms,
                    last_sent_ms: a.last_sent_ms,
                })
            })
            .collect()
    }

    /// Takes back saved alerts whose rule is still configured with the same definition;
    /// returns how many were taken and how many were dropped. An alert already known (its
    /// labels already active) is left as it is.
    pub fn restore(&mut self, saved: impl IntoIterator<Item = SavedAlert>) -> (usize, usize) {
        let (mut taken, mut dropped) = (0, 0);
        for s in saved {
            let rule = AlertName::ALL
                .into_iter()
                .find(|n| n.as_str() == s.alertname)
                .and_then(|n| rule_of(&self.rules, n))
                .filter(|r| definition(r) == s.rule);
            let Some(rule) = rule else {
                dropped += 1;
                continue;
            };
            let fp = Fingerprint::of(&s.labels);
            if self.active.contains_key(&fp) {
                continue;
            }
            let state = if s.firing { AlertState::Firing } else { AlertState::Pending };
            self.active.insert(
                fp,
                ActiveAlert {
                    name: rule.name,
                    labels: s.labels,
                    annotations: s.annotations,
                    value: s.value,
                    state,
                    active_at_ms: s.active_at_ms,
                    fired_at_ms: s.fired_at_ms.filter(|_| s.firing),
                    last_sent_ms: s.last_sent_ms,
                    restored: true,
                },
            );
            taken += 1;
        }
        (taken, dropped)
    }
}
