//! The report's families, registered in the order docs/metrics.md lists them: the per-target
//! families, the request path's, the SLO limits, budgets, capacity, alerts and GPUs. The
//! daemon registers its live families after these (`goodput_daemon::serve::catalog`).

use std::sync::LazyLock;

use super::registry::Registry;
use super::{alerts, budget, capacity, families, gpu, limits, requests};

/// Registers the report's families into `r`, a group per part.
pub fn register_report(r: &mut Registry) {
    r.register("Per target, model and window", families::FAMILIES)
        .register("From requests (tap, OTLP)", requests::FAMILIES)
        .register("SLO and KV band limits", limits::FAMILIES)
        .register("Error budgets", budget::FAMILIES)
        .register("Capacity", capacity::FAMILIES)
        .register("Alerts", alerts::FAMILIES)
        .register("GPUs", gpu::FAMILIES.iter().chain(gpu::DERIVED));
}

/// The report's families, registered once.
pub fn report_registry() -> &'static Registry {
    static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
        let mut r = Registry::new();
        register_report(&mut r);
        r
    });
    &REGISTRY
}

/// HELP text and TYPE of a report family.
pub fn family_meta(name: &str) -> Option<(&'static str, &'static str)> {
    report_registry().meta(name)
}
