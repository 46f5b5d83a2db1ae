//! `alerting:` (docs/alerts.md): the section is read as crate::alert::config's own type,
//! which checks each value where it is written; here, what spans several keys, and the
//! deprecated `runbook_base_url` at the line and column of its key.

use super::error::{Diagnostics, Pos};
use super::raw::S;
use crate::alert::config::{AlertingConfig, base_as_page};
use crate::duration::Window;
use crate::slo::Slo;

pub(super) fn alerting_section(
    d: &mut Diagnostics,
    raw: Option<&S<AlertingConfig>>,
    keys: &[(String, Pos)],
    slos: &[Slo],
    windows: &[Window],
) -> AlertingConfig {
    let Some(raw) = raw else { return AlertingConfig::default() };
    let cfg = raw.value.clone();
    if cfg.alertmanager.is_some() && !cfg.alertmanagers.is_empty() {
        d.error(raw.pos, "both alerting.alertmanager and alerting.alertmanagers are set; use alertmanagers: [{url: ...}, ...] for several");
    }
    if let Some(base) = &cfg.runbook_base_url {
        let at = keys.iter().find(|(k, _)| k == "runbook_base_url").map_or(raw.pos, |(_, p)| *p);
        let same = format!("runbook_url: {:?}", base_as_page(base));
        if cfg.runbook_url.is_some() {
            d.error(at, format!("alerting.runbook_base_url and alerting.runbook_url are both set; remove runbook_base_url, which is deprecated (its links were `{same}`)"));
        } else {
            d.warn(at, format!("alerting.runbook_base_url is deprecated; write `{same}` instead, which gives the same links (docs/alerts.md#runbooks)"));
        }
    }
    let findings = crate::alert::validate::validate(&cfg, slos, windows);
    for e in findings.errors {
        d.error(raw.pos, e);
    }
    for w in findings.warnings {
        d.warn(raw.pos, w);
    }
    cfg
}
