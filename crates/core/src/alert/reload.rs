//! Alert states across a config reload (docs/discovery.md#reload).
//!
//! A rule whose definition did not change keeps its alerts as they are: pending or firing
//! since the same `activeAt`, resent on the same schedule, so Alertmanager sees the alert
//! carry on. A rule that changed (its `for`, threshold, windows, severity, or the SLO it
//! judges) or was removed starts afresh: its firing alerts are resolved once, at the reload,
//! and its pending ones are dropped; if the condition still holds under the new definition,
//! the next tick raises it anew with a new `activeAt`.

use std::collections::BTreeSet;
use std::time::Duration;

use super::kind::RuleSet;
use super::saved::{definition, rule_of};
use super::state::{AlertEngine, AlertState, Notification};

/// What a reload did to the alert states.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reconfigured {
    /// Alerts of unchanged rules, kept as they were.
    pub kept: usize,
    /// Pending alerts of changed or removed rules, dropped silently (nothing was sent).
    pub dropped: usize,
    /// One resolution per firing alert of a changed or removed rule, ending at the reload.
    pub resolved: Vec<Notification>,
}

impl AlertEngine {
    /// Takes the rules of a new config at `now_ms`. `changed_slos` names the SLOs whose
    /// definition changed or that were removed: an alert labelled with one (the burn-rate
    /// and latency rules label theirs with `slo`) was judged against what no longer holds,
    /// and starts afresh like an alert of a changed rule.
    pub fn reconfigure(
        &mut self,
        rules: RuleSet,
        runbook_page: Option<String>,
        resend_interval: Duration,
        changed_slos: &BTreeSet<String>,
        now_ms: i64,
    ) -> Reconfigured {
        let mut out = Reconfigured::default();
        let old = std::mem::replace(&mut self.rules, rules);
        let new = &self.rules;
        self.active.retain(|fp, a| {
            let same_rule = match (rule_of(&old, a.name), rule_of(new, a.name)) {
                (Some(o), Some(n)) => definition(o) == definition(n),
                _ => false,
            };
            let same_slo = a.labels.get("slo").is_none_or(|s| !changed_slos.contains(s));
            if same_rule && same_slo {
                out.kept += 1;
                return true;
            }
            match a.state {
                AlertState::Firing => out.resolved.push(Notification {
                    fingerprint: fp.clone(),
                    labels: a.labels.clone(),
                    annotations: a.annotations.clone(),
                    starts_at_ms: a.active_at_ms,
                    ends_at_ms: Some(now_ms),
                }),
                AlertState::Pending => out.dropped += 1,
            }
            false
        });
        self.set_delivery(runbook_page, resend_interval);
        out
    }

    /// Where the `runbook_url` annotations point and how often firing alerts are resent,
    /// from the next evaluation on.
    pub fn set_delivery(&mut self, runbook_page: Option<String>, resend_interval: Duration) {
        self.runbook_page = runbook_page;
        self.resend_interval = resend_interval;
    }

    /// Makes every firing alert due to be sent at the next evaluation, keeping when it
    /// started: for destinations that have not heard of it (a reload that adds one), or
    /// under labels they have not seen (changed `external_labels`).
    pub fn resend_firing(&mut self) {
        for a in self.active.values_mut().filter(|a| a.state == AlertState::Firing) {
            a.last_sent_ms = None;
        }
    }

    /// Every firing alert resolved at `now_ms`, without forgetting it: what destinations
    /// were sent must hear that those labels are done (`external_labels` changed, and the
    /// alerts carry on under the new ones).
    pub fn firing_resolved_at(&self, now_ms: i64) -> Vec<Notification> {
        self.active
            .iter()
            .filter(|(_, a)| a.state == AlertState::Firing)
            .map(|(fp, a)| Notification {
                fingerprint: fp.clone(),
                labels: a.labels.clone(),
                annotations: a.annotations.clone(),
                starts_at_ms: a.active_at_ms,
                ends_at_ms: Some(now_ms),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::config::AlertingConfig;
    use crate::alert::input::AlertInput;
    use crate::alert::rule::AlertName;

    fn engine(c: &AlertingConfig) -> AlertEngine {
        AlertEngine::new(c.rule_set(), None, Duration::from_secs(300))
    }

    fn down(target: &str) -> AlertInput {
        AlertInput {
            target: target.into(),
            model: String::new(),
            up: false,
            waiting_now: None,
            slos: Vec::new(),
            windows: Vec::new(),
            capacity: Vec::new(),
        }
    }

    fn active_at(e: &AlertEngine) -> Vec<(AlertState, i64)> {
        e.active().map(|a| (a.state, a.active_at_ms)).collect()
    }

    #[test]
    fn an_unchanged_rule_keeps_its_alerts_and_a_changed_one_resolves_once_and_starts_afresh() {
        let c = AlertingConfig::default();
        let mut e = engine(&c);
        e.evaluate(0, &[down("t")]);
        assert_eq!(e.evaluate(60_000, &[down("t")]).len(), 1, "fires after its for");

        // The same rules (another resend interval): kept, firing since 0, not resent early.
        let r =
            e.reconfigure(c.rule_set(), Some("http://x/".into()), Duration::from_secs(600), &BTreeSet::new(), 70_000);
        assert_eq!((r.kept, r.dropped, r.resolved.len()), (1, 0, 0));
        assert!(e.evaluate(80_000, &[down("t")]).is_empty());
        assert_eq!(active_at(&e), [(AlertState::Firing, 0)]);
        let annotated = e.active().next().unwrap().annotations.get("runbook_url").cloned();
        assert_eq!(annotated.as_deref(), Some("http://x/#llmtargetdown"), "the new runbook page is used");

        // A changed `for`: resolved once at the reload, then raised anew under the new rule.
        let mut changed = c.clone();
        changed.rules.target_down.for_ = Some(Duration::from_secs(120));
        let r = e.reconfigure(changed.rule_set(), None, Duration::from_secs(300), &BTreeSet::new(), 90_000);
        assert_eq!((r.kept, r.dropped), (0, 0));
        assert_eq!(r.resolved.len(), 1);
        assert_eq!((r.resolved[0].starts_at_ms, r.resolved[0].ends_at_ms), (0, Some(90_000)));
        assert_eq!(e.active().count(), 0);
        assert!(e.evaluate(100_000, &[down("t")]).is_empty(), "pending again, nothing to send");
        assert_eq!(active_at(&e), [(AlertState::Pending, 100_000)]);

        // A removed (disabled) rule drops a pending alert silently.
        let mut off = changed.clone();
        off.rules.target_down.enabled = Some(false);
        let r = e.reconfigure(off.rule_set(), None, Duration::from_secs(300), &BTreeSet::new(), 110_000);
        assert_eq!((r.kept, r.dropped, r.resolved.len()), (0, 1, 0));
        assert!(e.rules.rules.iter().all(|r| r.name != AlertName::TargetDown));
    }

    #[test]
    fn an_alert_of_a_changed_slo_starts_afresh_and_others_are_kept() {
        let c = AlertingConfig::default();
        let mut e = engine(&c);
        e.evaluate(0, &[down("t")]);
        e.evaluate(60_000, &[down("t")]);
        // Stand-ins for two SLO alerts: the same rule, one label apart.
        let template = e.active.values().next().unwrap().clone();
        e.active.clear();
        for slo in ["fast", "slow"] {
            let mut a = template.clone();
            a.labels.insert("slo".into(), slo.into());
            e.active.insert(crate::alert::state::Fingerprint::of(&a.labels), a);
        }
        let changed: BTreeSet<String> = ["fast".to_string()].into();
        let r = e.reconfigure(c.rule_set(), None, Duration::from_secs(300), &changed, 70_000);
        assert_eq!(r.kept, 1);
        assert_eq!(r.resolved.len(), 1);
        assert_eq!(r.resolved[0].labels.get("slo").map(String::as_str), Some("fast"));
        assert_eq!(e.active().map(|a| a.labels["slo"].as_str()).collect::<Vec<_>>(), ["slow"]);
    }

    #[test]
    fn firing_alerts_can_be_resolved_under_old_labels_and_resent_under_new_ones() {
        let c = AlertingConfig::default();
        let mut e = engine(&c);
        e.evaluate(0, &[down("t")]);
        e.evaluate(60_000, &[down("t")]);
        let ended = e.firing_resolved_at(65_000);
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].ends_at_ms, Some(65_000));
        assert_eq!(e.active().count(), 1, "still firing");
        assert!(e.evaluate(70_000, &[down("t")]).is_empty(), "not due before the resend interval");
        e.resend_firing();
        let again = e.evaluate(75_000, &[down("t")]);
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].starts_at_ms, again[0].ends_at_ms), (0, None));
    }
}
