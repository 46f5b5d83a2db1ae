//! What an alert rule is: the alerts this daemon raises, their severities, and each rule's
//! kind and knobs. The vocabulary that the rule evaluation ([`super::rule`]), the alert
//! table ([`super::table`]) and the config share.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration::Window;
use crate::slo::Clause;

/// Every alert this daemon raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlertName {
    KvCacheSaturated,
    GoodputDivergence,
    TtftAboveSlo,
    TpotAboveSlo,
    ErrorBudgetBurnFast,
    ErrorBudgetBurnSlow,
    TargetDown,
    PreemptionsSustained,
    QueueGrowing,
    CapacityHeadroomLow,
}

impl AlertName {
    pub const ALL: [AlertName; 10] = [
        AlertName::KvCacheSaturated,
        AlertName::GoodputDivergence,
        AlertName::TtftAboveSlo,
        AlertName::TpotAboveSlo,
        AlertName::ErrorBudgetBurnFast,
        AlertName::ErrorBudgetBurnSlow,
        AlertName::TargetDown,
        AlertName::PreemptionsSustained,
        AlertName::QueueGrowing,
        AlertName::CapacityHeadroomLow,
    ];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Page,
    Ticket,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Page => "page",
            Severity::Ticket => "ticket",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyClause {
    Ttft,
    Tpot,
}

impl LatencyClause {
    pub fn as_str(self) -> &'static str {
        match self {
            LatencyClause::Ttft => "TTFT",
            LatencyClause::Tpot => "TPOT",
        }
    }

    /// The SLO clause whose threshold this alert compares with.
    pub fn clause(self) -> Clause {
        match self {
            LatencyClause::Ttft => Clause::Ttft,
            LatencyClause::Tpot => Clause::Tpot,
        }
    }
}

/// What a rule tests, with its knobs.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleKind {
    /// Last KV usage above `threshold`.
    KvCacheSaturated {
        threshold: f64,
    },
    /// Joint attainment estimate below `threshold` while output tokens/s exceed the floor.
    GoodputDivergence {
        threshold: f64,
        window: Window,
        throughput_floor: f64,
    },
    /// p99 above the SLO's threshold for that clause.
    LatencyAboveSlo {
        clause: LatencyClause,
        window: Window,
    },
    /// Burn rate above `factor` in both windows, each with at least `min_requests` finished.
    ErrorBudgetBurn {
        factor: f64,
        long_window: Window,
        short_window: Window,
        min_requests: f64,
    },
    TargetDown,
    PreemptionsSustained {
        per_second: f64,
        window: Window,
    },
    /// Waiting requests rose over the window and are at least `min_waiting`.
    QueueGrowing {
        min_waiting: f64,
        window: Window,
    },
    /// The conservative capacity (docs/capacity.md) over the current arrival rate is under
    /// `factor` while arrivals rise. Reads the capacity book, not a window.
    CapacityHeadroomLow {
        factor: f64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub name: AlertName,
    pub for_: Duration,
    pub severity: Severity,
    pub kind: RuleKind,
    /// Share of each window it reads that must be covered by data before the rule may
    /// judge a target and model (docs/alerts.md#after-a-restart).
    pub min_coverage: f64,
}

impl RuleKind {
    /// Whether the rule reads SLO quantities (attainment, burn, p99 against a threshold),
    /// which may come from requests rather than the scrapes; their coverage is then the
    /// request source's (`WindowInput::slo_coverage`).
    pub fn reads_slos(&self) -> bool {
        matches!(
            self,
            RuleKind::GoodputDivergence { .. } | RuleKind::LatencyAboveSlo { .. } | RuleKind::ErrorBudgetBurn { .. }
        )
    }

    /// The windows the rule reads; none for the rules on the last scrape or scrape health.
    pub fn windows(&self) -> Vec<Window> {
        match *self {
            RuleKind::GoodputDivergence { window, .. }
            | RuleKind::LatencyAboveSlo { window, .. }
            | RuleKind::PreemptionsSustained { window, .. }
            | RuleKind::QueueGrowing { window, .. } => vec![window],
            RuleKind::ErrorBudgetBurn { long_window, short_window, .. } => vec![long_window, short_window],
            RuleKind::KvCacheSaturated { .. } | RuleKind::TargetDown | RuleKind::CapacityHeadroomLow { .. } => {
                Vec::new()
            }
        }
    }
}

/// The enabled rules.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
}
