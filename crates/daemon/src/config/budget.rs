//! `slos[].period`: how far back each SLO's error budget counts (docs/config.md#slos,
//! docs/metrics.md#error-budget-over-a-period).

use std::collections::BTreeMap;
use std::time::Duration;

use super::error::Diagnostics;
use super::raw::{RawSlo, S};
use super::types::Config;
use crate::budget::{BudgetSpec, DEFAULT_PERIOD, MAX_PERIOD, MIN_PERIOD};
use crate::duration::{format_duration, parse_duration};

/// The period of every SLO that sets one, by name; the others get [`DEFAULT_PERIOD`].
pub(super) fn slo_periods(d: &mut Diagnostics, raw: &[S<RawSlo>]) -> BTreeMap<String, Duration> {
    let mut out = BTreeMap::new();
    for slo in raw {
        let Some(p) = &slo.value.period else { continue };
        let name = slo.value.name.value.trim();
        match parse_duration(&p.value) {
            Err(e) => d.error(p.pos, format!("slo {name:?} period: {e}; write e.g. 28d or 30d")),
            Ok(v) if v < MIN_PERIOD || v > MAX_PERIOD => d.error(
                p.pos,
                format!(
                    "slo {name:?} period {} is out of range; use between {} and {}, e.g. 28d (the default) or 30d",
                    p.value.trim(),
                    format_duration(MIN_PERIOD),
                    format_duration(MAX_PERIOD)
                ),
            ),
            Ok(v) => {
                out.insert(name.to_string(), v);
            }
        }
    }
    out
}

impl Config {
    /// Each SLO with the period its error budget is counted over.
    pub fn budget_specs(&self) -> Vec<BudgetSpec> {
        self.slos
            .iter()
            .map(|s| BudgetSpec {
                slo: s.clone(),
                period: self.slo_periods.get(&s.name).copied().unwrap_or(DEFAULT_PERIOD),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(slos: &str) -> Result<Config, String> {
        let text = format!("targets: [{{name: a, url: 'http://127.0.0.1:8000/metrics'}}]\nslos: {slos}\n");
        super::super::from_str(&text, "c.yaml").map(|l| l.config).map_err(|e| e.to_string())
    }

    #[test]
    fn periods_default_to_four_weeks_and_are_checked() {
        let c =
            load("[{name: a, ttft: 1s, objective: 0.99}, {name: b, ttft: 1s, objective: 0.9, period: 30d}]").unwrap();
        let periods: Vec<(String, Duration)> = c.budget_specs().into_iter().map(|s| (s.slo.name, s.period)).collect();
        assert_eq!(
            periods,
            [("a".to_string(), Duration::from_secs(28 * 86_400)), ("b".to_string(), Duration::from_secs(30 * 86_400))]
        );
        let e = load("[{name: a, ttft: 1s, objective: 0.99, period: 5m}]").unwrap_err();
        assert!(e.contains("period 5m is out of range") && e.contains("between 1h and 366d"), "{e}");
        let e = load("[{name: a, ttft: 1s, objective: 0.99, period: monthly}]").unwrap_err();
        assert!(e.contains("slo \"a\" period") && e.contains("28d"), "{e}");
    }
}
