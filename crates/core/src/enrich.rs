//! After evaluation, before publishing: join GPU telemetry to the engine's windows (MFU,
//! HBM bandwidth, decode TPOT floor, cost), feed the capacity book (docs/capacity.md) and
//! run the alert rules on the result.
//!
//! The live daemon and `goodput replay` both call [`Enricher::apply`], so /metrics and
//! replay show the same `llm_slo_alert`, capacity and GPU families. The capacity book lives
//! here rather than beside the budgets because the alert rules of the same tick read it.

use crate::alert::config::AlertingConfig;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use crate::alert::from_report;
use crate::alert::reload::Reconfigured;
use crate::alert::state::{AlertEngine, Notification};
use crate::alert::view;
use crate::capacity::{CapacityBook, CapacityConfig};
use crate::duration::Window;
use crate::evaluate::EvalConfig;
use crate::gpu::config::{CostConfig, GpuConfig};
use crate::gpu::derive::{self, Bounds, Inputs};
use crate::gpu::reading::{GpuReading, mean_dram_active};
use crate::gpu::{models, peaks};
use crate::report::{Report, SloStatus, WindowReport};
use crate::slo::Slo;

/// Alert state and GPU facts carried from one tick to the next.
pub struct Enricher {
    alerts: AlertEngine,
    /// Every configured SLO; each alert input gets those that apply to it.
    slos: Vec<Slo>,
    gpu: GpuConfig,
    cost: Option<CostConfig>,
    /// Shared with what snapshots it (the daemon's `state_dir`).
    capacity: Arc<Mutex<CapacityBook>>,
    /// Windows only the alert rules read: nothing is derived for them.
    alert_only: Vec<Window>,
    /// `kv_cache.critical`, which the capacity book's saturation signal reads.
    kv_critical: f64,
}

impl Enricher {
    pub fn new(
        eval: &EvalConfig,
        alerting: &AlertingConfig,
        gpu: Option<&GpuConfig>,
        cost: Option<&CostConfig>,
    ) -> Self {
        let alerts = AlertEngine::new(alerting.rule_set(), alerting.runbook_page(), alerting.resend_interval);
        let capacity = CapacityBook::new(
            eval.slos.clone(),
            CapacityConfig { kv_critical: eval.kv.critical, ..CapacityConfig::default() },
        );
        Enricher {
            alerts,
            slos: eval.slos.clone(),
            gpu: gpu.cloned().unwrap_or_default(),
            cost: cost.cloned(),
            capacity: Arc::new(Mutex::new(capacity)),
            alert_only: eval.alert_only.iter().map(|a| a.window).collect(),
            kv_critical: eval.kv.critical,
        }
    }

    /// Takes the SLOs, alert rules, GPU and cost settings of a reloaded config at `now_ms`
    /// (docs/discovery.md#reload). Alerts of unchanged rules and SLOs carry on; those of a
    /// changed or removed rule or SLO end, each firing one with a resolution in the result
    /// ([`AlertEngine::reconfigure`]). The capacity book is kept while the SLOs and
    /// `kv_cache.critical` are the same: its history was judged against them, so a change
    /// of either starts it afresh.
    pub fn reconfigure(
        &mut self,
        eval: &EvalConfig,
        alerting: &AlertingConfig,
        gpu: Option<&GpuConfig>,
        cost: Option<&CostConfig>,
        now_ms: i64,
    ) -> Reconfigured {
        let changed: BTreeSet<String> =
            self.slos.iter().filter(|o| !eval.slos.contains(o)).map(|o| o.name.clone()).collect();
        let r = self.alerts.reconfigure(
            alerting.rule_set(),
            alerting.runbook_page(),
            alerting.resend_interval,
            &changed,
            now_ms,
        );
        if self.slos != eval.slos || self.kv_critical != eval.kv.critical {
            *self.capacity.lock().unwrap_or_else(|e| e.into_inner()) = CapacityBook::new(
                eval.slos.clone(),
                CapacityConfig { kv_critical: eval.kv.critical, ..CapacityConfig::default() },
            );
        }
        self.slos = eval.slos.clone();
        self.kv_critical = eval.kv.critical;
        self.gpu = gpu.cloned().unwrap_or_default();
        self.cost = cost.cloned();
        self.alert_only = eval.alert_only.iter().map(|a| a.window).collect();
        r
    }

    /// The alert states carried between ticks (what a `state_dir` snapshot saves).
    pub fn alerts(&self) -> &AlertEngine {
        &self.alerts
    }

    pub fn alerts_mut(&mut self) -> &mut AlertEngine {
        &mut self.alerts
    }

    /// The capacity book (what a `state_dir` snapshot saves of it, and restores into it).
    pub fn capacity(&self) -> Arc<Mutex<CapacityBook>> {
        self.capacity.clone()
    }

    /// Attaches `gpus` and what follows from them, evaluates the alert rules at the
    /// report's instant, and returns what alert delivery should send.
    pub fn apply(&mut self, report: &mut Report, gpus: Vec<GpuReading>) -> Vec<Notification> {
        // GPU telemetry describes the GPUs next to this daemon: it belongs to a target only
        // when there is exactly one (the sidecar). An aggregator exports the GPUs alone.
        if report.targets.len() == 1 {
            let n_gpus =
                if gpus.is_empty() { self.cost.as_ref().and_then(|c| c.gpus).unwrap_or(0) } else { gpus.len() as u32 };
            let peak = peaks::peak_for(&gpus, &self.gpu.peaks);
            let dram = mean_dram_active(&gpus);
            for m in report.targets[0].models_mut() {
                let spec = models::lookup(&m.model, &self.gpu.models);
                for w in m.windows.iter_mut().filter(|w| !self.alert_only.contains(&w.window)) {
                    let inputs = inputs(w, n_gpus, dram);
                    let good = goodput_bounds(w);
                    let hourly = self.cost.as_ref().map(|c| c.gpu_hour_dollars);
                    let d = derive::derive(&inputs, spec.as_ref(), peak.as_ref(), hourly, good.as_ref());
                    w.gpu = Some(d).filter(|d| *d != derive::Derived::default());
                }
            }
        }
        report.gpus = gpus;
        report.capacity = self.capacity.lock().unwrap_or_else(|e| e.into_inner()).feed(report);
        let inputs = from_report::inputs(report, &self.slos);
        let notifications = self.alerts.evaluate(report.t_ms, &inputs);
        report.alerts = view::api_response(&self.alerts).data.alerts;
        report.alert_readiness = self.alerts.readiness(&inputs);
        notifications
    }
}

fn inputs(w: &WindowReport, n_gpus: u32, dram_active_ratio: Option<f64>) -> Inputs {
    Inputs {
        n_gpus,
        engine_flops_per_gpu: w.engine_flops_per_gpu_per_second,
        engine_bytes_per_gpu: w.engine_bytes_per_gpu_per_second,
        dram_active_ratio,
        prefill_tokens_per_second: w.input_tokens_per_second,
        decode_tokens_per_second: w.output_tokens_per_second,
        mean_prompt_tokens: w.mean_prompt_tokens,
        mean_output_tokens: w.mean_output_tokens,
        steps_per_second: None,
        batch: w.running.map(|r| r.mean),
    }
}

/// Token goodput of the first evaluated SLO, for $/M good tokens.
fn goodput_bounds(w: &WindowReport) -> Option<Bounds> {
    w.slos.iter().find_map(|s| match &s.status {
        SloStatus::Evaluated(v) => v.goodput_tokens_per_second.map(|g| Bounds {
            lower: Some(g.lower),
            estimate: Some(g.estimate),
            upper: Some(g.upper),
        }),
        _ => None,
    })
}
