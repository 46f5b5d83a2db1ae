//! Puts the store's windows into the tick's [`Report`], beside the histogram-derived values
//! of the same target, model and window. The tap's windows carry their TTFT gap, paired per
//! request by the store ([`super::pair`]); it is never a difference of the tap's and the
//! histograms' distributions.
//!
//! A model the engine's /metrics does not name (a client's spelling of it) gets a model
//! entry of its own, with empty histogram windows.

use super::evaluate::SeriesWindows;
use crate::report::request::{DataSource, RequestPathReport, RequestWindow};
use crate::report::{ModelReport, Report, SloStatus, SloValues, WindowReport};

/// Adds every series' windows to the report's targets and sets `report.request_path`.
/// Series of targets the report lacks are left out.
pub fn attach(report: &mut Report, series: Vec<SeriesWindows>, counters: RequestPathReport) {
    for s in series {
        let Some(t) = report.targets.iter_mut().find(|t| t.target == s.key.target) else { continue };
        let models = t.models_mut();
        let m = match models.iter().position(|m| m.model == s.key.model) {
            Some(i) => &mut models[i],
            None => {
                models.push(ModelReport { model: s.key.model.clone(), windows: Vec::new() });
                let last = models.len() - 1;
                &mut models[last]
            }
        };
        for (w, rw) in s.windows {
            let wr = match m.windows.iter().position(|x| x.window == w) {
                Some(i) => &mut m.windows[i],
                None => {
                    m.windows.push(WindowReport::empty(w));
                    let last = m.windows.len() - 1;
                    &mut m.windows[last]
                }
            };
            wr.requests.push(rw);
            wr.requests.sort_by_key(|r| r.source);
        }
    }
    report.request_path = Some(counters);
}

/// The request window a consumer should read for `w`: the first of tap, then otlp, that
/// saw a request finish in it (docs/alerts.md#which-source-alerts-read).
pub fn preferred(w: &WindowReport) -> Option<&RequestWindow> {
    w.requests.iter().filter(|r| r.source != DataSource::Metrics).find(|r| r.requests > 0)
}

/// One SLO's values over `w` from the [`preferred`] request source, when it evaluated them:
/// what the status page and the demo summary show beside the histogram bracket.
pub fn preferred_slo<'a>(w: &'a WindowReport, slo: &str) -> Option<(DataSource, &'a SloValues)> {
    let r = preferred(w)?;
    r.slos.iter().find(|s| s.slo == slo).and_then(|s| match &s.status {
        SloStatus::Evaluated(v) => Some((r.source, v)),
        _ => None,
    })
}
