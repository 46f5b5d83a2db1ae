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

/// A rule's definition as a snapshot (and a config reload, super::reload) compares it.
pub(super) fn definition(rule: &Rule) -> String {
    format!("{rule:?}")
}

pub(super) fn rule_of(rules: &RuleSet, name: AlertName) -> Option<&Rule> {
    rules.rules.iter().find(|r| r.name == name)
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::alert::{AlertInput, AlertingConfig};

    fn engine() -> AlertEngine {
        let c = AlertingConfig::default();
        AlertEngine::new(c.rule_set(), None, Duration::from_secs(300))
    }

    fn down(up: bool) -> AlertInput {
        AlertInput {
            target: "t".into(),
            model: String::new(),
            up,
            waiting_now: None,
            slos: Vec::new(),
            windows: Vec::new(),
            capacity: Vec::new(),
        }
    }

    #[test]
    fn a_restored_alert_keeps_its_start_and_is_neither_resent_nor_resolved_early() {
        let mut e = engine();
        assert!(e.evaluate(0, &[down(false)]).is_empty(), "pending");
        let fired = e.evaluate(60_000, &[down(false)]);
        assert_eq!(fired.len(), 1);
        let saved = e.saved(|t| t == "t");
        assert_eq!(saved.len(), 1);
        assert!(e.saved(|t| t == "other").is_empty());

        let mut back = engine();
        assert_eq!(back.restore(saved.clone()), (1, 0));
        // The first tick after a restart has no input for the target yet: held, not resolved.
        assert!(back.evaluate(90_000, &[]).is_empty());
        assert_eq!(back.active().count(), 1);
        // Still down: firing since its original start, not sent again before the resend.
        assert!(back.evaluate(100_000, &[down(false)]).is_empty());
        let a = back.active().next().unwrap();
        assert_eq!((a.state, a.active_at_ms, a.fired_at_ms), (AlertState::Firing, 0, Some(60_000)));
        let resent = back.evaluate(360_000, &[down(false)]);
        assert_eq!(resent.len(), 1);
        assert_eq!(resent[0].starts_at_ms, 0, "Alertmanager sees the original startsAt");
        // Up again: resolved, once.
        let resolved = back.evaluate(370_000, &[down(true)]);
        assert_eq!(resolved.len(), 1);
        assert_eq!(resolved[0].ends_at_ms, Some(370_000));

        // Judged up on its first tick back, a restored alert resolves at once.
        let mut back = engine();
        back.restore(saved.clone());
        assert_eq!(back.evaluate(90_000, &[down(true)]).len(), 1);

        // A changed rule drops it.
        let mut other = AlertEngine::new(RuleSet { rules: Vec::new() }, None, Duration::from_secs(300));
        assert_eq!(other.restore(saved.clone()), (0, 1));
        let mut changed = saved;
        changed[0].rule.push('x');
        assert_eq!(engine().restore(changed), (0, 1));
    }
}
