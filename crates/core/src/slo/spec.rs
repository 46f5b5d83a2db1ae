//! The one SLO type (docs/config.md#slos): its latency thresholds, objective and scope.
//!
//! Evaluation, the alert rules, `goodput rules` and the config all read this type, so an
//! SLO's scope cannot be lost on the way from the YAML to an alert: the alert input for a
//! target and model carries only the SLOs whose [`Scope`] applies to it.

use std::fmt;
use std::time::Duration;

use super::Clause;

/// The share of requests that must be good: a number strictly between 0 and 1.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Objective(f64);

impl Objective {
    /// `None` unless `0 < share < 1` (1 would leave no error budget to burn).
    pub fn new(share: f64) -> Option<Objective> {
        (share > 0.0 && share < 1.0).then_some(Objective(share))
    }

    pub fn get(self) -> f64 {
        self.0
    }

    /// The share of requests allowed to be bad, `1 − objective`.
    pub fn error_budget(self) -> f64 {
        1.0 - self.0
    }
}

impl fmt::Display for Objective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Which targets and models an SLO judges. An empty list means all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// Names of configured targets.
    pub targets: Vec<String>,
    /// Model names as the engines report them.
    pub models: Vec<String>,
}

impl Scope {
    /// Every target and every model.
    pub fn all() -> Scope {
        Scope::default()
    }

    pub fn applies_to(&self, target: &str, model: &str) -> bool {
        self.applies_to_target(target) && self.applies_to_model(model)
    }

    pub fn applies_to_target(&self, target: &str) -> bool {
        self.targets.is_empty() || self.targets.iter().any(|t| t == target)
    }

    pub fn applies_to_model(&self, model: &str) -> bool {
        self.models.is_empty() || self.models.iter().any(|m| m == model)
    }
}

/// A latency SLO: at least one clause, an objective and a scope.
#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    pub name: String,
    pub ttft: Option<Duration>,
    pub tpot: Option<Duration>,
    pub e2e: Option<Duration>,
    pub objective: Objective,
    pub scope: Scope,
}

impl Slo {
    /// The latency limit of `clause`; `None` for a clause the SLO lacks (and for joint).
    pub fn threshold(&self, clause: Clause) -> Option<Duration> {
        match clause {
            Clause::Ttft => self.ttft,
            Clause::Tpot => self.tpot,
            Clause::E2e => self.e2e,
            Clause::Joint => None,
        }
    }

    /// The clauses this SLO sets, in TTFT, TPOT, E2E order, with their limits.
    pub fn clauses(&self) -> impl Iterator<Item = (Clause, Duration)> + '_ {
        [Clause::Ttft, Clause::Tpot, Clause::E2e].into_iter().filter_map(|c| self.threshold(c).map(|t| (c, t)))
    }

    pub fn applies_to(&self, target: &str, model: &str) -> bool {
        self.scope.applies_to(target, model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objective_is_strictly_inside_zero_and_one() {
        for bad in [0.0, 1.0, -0.5, 1.5, f64::NAN] {
            assert!(Objective::new(bad).is_none(), "{bad}");
        }
        let o = Objective::new(0.99).unwrap();
        assert_eq!(o.get(), 0.99);
        assert!((o.error_budget() - 0.01).abs() < 1e-15);
    }

    #[test]
    fn scope_narrows_only_where_a_list_is_given() {
        let all = Scope::all();
        assert!(all.applies_to("any", "thing"));
        let s = Scope { targets: vec!["a".into()], models: vec!["m1".into(), "m2".into()] };
        assert!(s.applies_to("a", "m2"));
        assert!(!s.applies_to("b", "m2"));
        assert!(!s.applies_to("a", "m3"));
        let models_only = Scope { targets: vec![], models: vec!["m1".into()] };
        assert!(models_only.applies_to("anything", "m1") && !models_only.applies_to("anything", "m2"));
    }

    #[test]
    fn clauses_in_order_with_limits() {
        let slo = Slo {
            name: "s".into(),
            ttft: None,
            tpot: Some(Duration::from_millis(50)),
            e2e: Some(Duration::from_secs(30)),
            objective: Objective::new(0.9).unwrap(),
            scope: Scope::all(),
        };
        let got: Vec<_> = slo.clauses().collect();
        assert_eq!(got, [(Clause::Tpot, Duration::from_millis(50)), (Clause::E2e, Duration::from_secs(30))]);
        assert_eq!(slo.threshold(Clause::Joint), None);
    }
}
