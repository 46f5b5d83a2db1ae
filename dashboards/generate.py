#!/usr/bin/env python3
"""Generates dashboards/overview.json and dashboards/target.json (Grafana JSON), from the
building blocks in dashboards/grafana.py, queries.py and sections.py, and dashboards/fleet.json
(dashboards/fleet.py, over the `llm_slo:` recording rules of `goodput rules`).

The JSON files are committed; edit these files and rerun this one instead of editing them, and
scripts/ci/dashboards.sh fails if they differ from a fresh generation.
Metric names follow docs/metrics.md (families llm_slo_*, GPU, MFU and HBM included).
Every query of the per-target dashboards keeps the replica identity (queries.IDENTITY: the
external labels pod, namespace, node, cluster, and Prometheus's instance), so sidecars of
one model never merge; those that deliberately span replicas (a config limit, a count)
carry "goodputAcrossReplicas": "<reason>". Queries that can legitimately be empty (no GPU
in CI, no alert pending) carry "goodputOptional": "<reason>"; the PromQL check reports them
but does not fail on empty data. Those the live check has for some selections only (one
engine's speculative decoding, one SLO's e2e limit) also carry "goodputSomewhere": true,
and must return data for one of the selections the check tries.
usage: python3 dashboards/generate.py [--check]
"""
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ next to the committed JSON
from fleet import fleet  # noqa: E402
from grafana import (Layout, bounds_style, dashboard, limit_style, mean_style, panel, render, row, ts,  # noqa: E402
                     variable_query)
from queries import (COUNT, MET, OVERVIEW_DASH, REPLICA, SEL, SLO, SPEC, TARGET_DASH, TSEL, WHO, WIN,  # noqa: E402
                     by, objective_query, q, threshold_query)
from sections import (alerts_table, budget_panels, capacity_panels, exact_panels,  # noqa: E402
                      finish_reason_panel, goodput_panels, gpu_row, health_panels, kv_panels,
                      latency_panel, length_heatmap, saturation_panels)

HERE = Path(__file__).resolve().parent


def templating(single_target):
    """Every variable from the data. The windows come from a family that only the configured
    windows carry (docs/metrics.md#alert-only-windows: 30m and 6h exist for the alert rules
    alone, and most panels would be empty there)."""
    return {"list": [
        {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
         "options": [], "refresh": 1},
        variable_query("namespace", "Namespace", "label_values(llm_slo_target_up, namespace)"),
        variable_query("pod", "Pod", 'label_values(llm_slo_target_up{namespace=~"$namespace"}, pod)'),
        variable_query("target", "Target", f"label_values(llm_slo_target_up{{{REPLICA}}}, target)",
                       multi=not single_target, include_all=not single_target),
        variable_query("model", "Model", f"label_values(llm_slo_requests_per_second{{{TSEL}}}, model)"),
        variable_query("slo", "SLO", f"label_values(llm_slo_attainment_ratio{{{SEL}}}, slo)"),
        variable_query("window", "Window", f"label_values(llm_slo_latency_mean_seconds{{{SEL}}}, window)",
                       multi=False, include_all=False, current="5m"),
    ]}


def overview():
    lay, panels = Layout(), []
    panels.append(row(lay, "Service level"))
    panels.append(panel(
        lay, "stat", "Joint SLO attainment (worst target per replica, estimate)",
        [q(f'min by ({by("slo")}) (llm_slo_attainment_ratio{{{SEL}, {MET}, {SLO}, clause="joint", bound="estimate", {WIN}}})',
           WHO + "{{slo}}", "A")],
        w=8, h=5, unit="percentunit", steps=[("red", None), ("orange", 0.95), ("green", 0.99)],
        desc=("Share of requests meeting every clause of the SLO (independence estimate; bounds below), "
              "one value per pod and SLO.")))
    panels.append(panel(
        lay, "stat", "Highest error-budget burn rate per replica",
        [q(f'max by ({by("slo")}) (llm_slo_error_budget_burn_rate{{{SEL}, {MET}, {SLO}, bound="estimate", {WIN}}})',
           WHO + "{{slo}}", "A")],
        w=8, h=5, unit="x", steps=[("green", None), ("orange", 6), ("red", 14.4)],
        desc="(1 - attainment) / (1 - objective). 14.4x over 1h spends 2 % of a 30-day budget."))
    panels.append(panel(
        lay, "stat", "Firing alerts",
        [q(f'count(llm_slo_alert{{{TSEL}, state="firing"}}) or vector(0)', "firing", "A", across=COUNT)],
        w=4, h=5, steps=[("green", None), ("red", 1)],
        desc="Every replica's firing alerts, counted; the alerts table below names them."))
    panels.append(panel(
        lay, "stat", "Targets up / down",
        [q(f"count(llm_slo_target_up{{{TSEL}}} == 1) or vector(0)", "up", "A", across=COUNT),
         q(f"count(llm_slo_target_up{{{TSEL}}} == 0) or vector(0)", "down", "B", across=COUNT)],
        w=4, h=5, steps=[("green", None)],
        overrides=[{"matcher": {"id": "byName", "options": "down"},
                    "properties": [{"id": "thresholds", "value": {"mode": "absolute", "steps": [
                        {"color": "green", "value": None}, {"color": "red", "value": 1}]}}]}],
        desc=("Targets counted once per replica: two sidecars that both watch `vllm` count twice, so one "
              "replica down shows as 1 down. Target up, per replica (scrape health) says which.")))
    budget_panels(lay, panels, SEL, "target, slo")

    panels.append(row(lay, "Goodput against throughput"))
    goodput_panels(lay, panels, SEL, "Joint SLO attainment with bounds (worst target per replica)",
                   "Lower max(0, p_ttft + p_tpot - 1), upper min(p_ttft, p_tpot), estimate p_ttft x p_tpot.")
    panels.append(panel(
        lay, "timeseries", "Error-budget burn rate by window",
        [q(f'max by ({by("slo", "window")}) (llm_slo_error_budget_burn_rate{{{SEL}, {MET}, {SLO}, bound="estimate"}})',
           WHO + "{{slo}} {{window}}", "A")],
        unit="x", minv=0, custom=ts(threshold_style="line"),
        steps=[("transparent", None), ("orange", 6), ("red", 14.4)],
        desc="Multi-window burn: page when both the long and the short window burn fast (14.4x at 1h/5m, 6x at 6h/30m)."))

    panels.append(row(lay, "Exact from requests (tap, OTLP spans)"))
    exact_panels(lay, panels, SEL)

    panels.append(row(lay, "Latency (p99 with histogram brackets)"))
    panels.append(latency_panel(lay, "ttft", "p99 TTFT", "0.99", "target, model", w=8))
    panels.append(latency_panel(lay, "tpot", "p99 TPOT (per request)", "0.99", "target, model", w=8))
    panels.append(latency_panel(lay, "itl", "p99 ITL (per step)", "0.99", "target, model", w=8))
    panels.append(panel(
        lay, "timeseries", "E2E latency p50 / p90 / p99 and mean",
        [q(f'max by ({by("q")}) (llm_slo_e2e_seconds{{{SEL}, {MET}, q=~"0.5|0.9|0.99", {WIN}}})', WHO + "p{{q}}", "A"),
         q(f'max by ({by()}) (llm_slo_latency_mean_seconds{{{SEL}, {MET}, metric="e2e", {WIN}}})',
           WHO + "worst target mean", "B"),
         threshold_query(SEL, "e2e")],
        w=12, unit="s", custom=ts(), overrides=[mean_style(), limit_style("SLO .* limit")],
        desc="Each replica's worst target: quantiles and mean; red dashed: each SLO's E2E limit from the config."))
    panels.append(panel(
        lay, "timeseries", "Token throughput by direction",
        [q(f"sum by ({by('direction')}) (llm_slo_tokens_per_second{{{SEL}, {WIN}}})", WHO + "{{direction}}", "A")],
        w=12, unit="short", custom=ts(),
        desc="input = prefill (compute-bound), output = decode (memory-bandwidth-bound); per replica."))
    panels.append(finish_reason_panel(lay, SEL))

    panels.append(row(lay, "KV cache"))
    kv_panels(lay, panels, SEL)

    panels.append(row(lay, "Saturation"))
    saturation_panels(lay, panels, SEL)

    panels.append(row(lay, "Alerts"))
    panels.append(alerts_table(lay, TSEL))

    gpu_row(lay, panels, TSEL)

    panels.append(row(lay, "Scrape health"))
    health_panels(lay, panels, TSEL)
    return dashboard(OVERVIEW_DASH, "goodput: LLM SLOs overview", panels, templating(single_target=False),
                     link_to=(TARGET_DASH, "Per-target drill-down"))


def target():
    lay, panels = Layout(), []
    tsel = f'{REPLICA}, target="$target"'
    sel = f'{tsel}, model=~"$model"'
    panels.append(row(lay, "SLO attainment and goodput"))
    panels.append(panel(
        lay, "timeseries", "Per-clause attainment with brackets",
        [q(f'min by ({by("slo", "clause", "bound")}) (llm_slo_attainment_ratio{{{sel}, {MET}, {SLO}, clause!="joint", {WIN}}})',
           WHO + "{{slo}} {{clause}} {{bound}}", "A"),
         objective_query(sel)],
        unit="percentunit", maxv=1, custom=ts(), overrides=bounds_style() + [limit_style("SLO .* objective")],
        desc=("Exact when the SLO threshold is a histogram bucket boundary (lower = upper); otherwise the truth "
              "lies between lower and upper and the estimate interpolates linearly.")))
    goodput_panels(lay, panels, sel, "Joint attainment: lower / estimate / upper", None)
    panels.append(panel(
        lay, "timeseries", "Error-budget burn rate, every window",
        [q(f"max by ({by('slo', 'window', 'bound')}) (llm_slo_error_budget_burn_rate{{{sel}, {MET}, {SLO}}})",
           WHO + "{{slo}} {{window}} {{bound}}", "A")],
        w=24, unit="x", minv=0, custom=ts(threshold_style="line"), overrides=bounds_style(),
        steps=[("transparent", None), ("orange", 6), ("red", 14.4)]))
    budget_panels(lay, panels, sel, "slo")

    panels.append(row(lay, "Exact from requests (tap, OTLP spans)"))
    exact_panels(lay, panels, sel)

    panels.append(row(lay, "Latency quantiles with brackets"))
    for metric, title in (("ttft", "TTFT"), ("tpot", "TPOT (per request)"), ("itl", "ITL (per step)"), ("e2e", "E2E")):
        panels.append(latency_panel(lay, metric, f"{title} p50 / p90 / p95 / p99", "0.5|0.9|0.95|0.99", "model"))

    panels.append(row(lay, "Throughput and KV cache"))
    panels.append(panel(
        lay, "timeseries", "Token throughput by direction",
        [q(f"sum by ({by('direction')}) (llm_slo_tokens_per_second{{{sel}, {WIN}}})", WHO + "{{direction}}", "A")],
        w=24, unit="short", custom=ts()))
    panels.append(finish_reason_panel(lay, sel, per_row=2))
    kv_panels(lay, panels, sel)

    panels.append(row(lay, "Saturation and request shape"))
    capacity_panels(lay, panels, sel)
    saturation_panels(lay, panels, sel)
    panels.append(panel(
        lay, "timeseries", "Mean prompt and output length",
        [q(f"max by ({by('direction')}) (llm_slo_request_tokens_mean{{{sel}, {WIN}}})", WHO + "{{direction}} tokens", "A")],
        w=8, unit="short", minv=0, custom=ts(),
        desc="Prefill-heavy (long prompts) and decode-heavy (long outputs) traffic stress different limits."))
    panels.append(panel(
        lay, "timeseries", "Prefix-cache hit ratio",
        [q(f"max by ({by('model')}) (llm_slo_prefix_cache_hit_ratio{{{sel}, {WIN}}})", WHO + "{{model}}", "A")],
        w=8, unit="percentunit", minv=0, maxv=1, custom=ts()))
    panels.append(panel(
        lay, "timeseries", "Speculative decoding: acceptance and mean accepted length",
        [q(f"max by ({by('model')}) (llm_slo_spec_decode_acceptance_ratio{{{sel}, {WIN}}})",
           WHO + "{{model}} acceptance", "A", SPEC),
         q(f"max by ({by('model')}) (llm_slo_spec_decode_mean_accepted_length{{{sel}, {WIN}}})",
           WHO + "{{model}} mean accepted length", "B", SPEC)],
        w=8, unit="short", minv=0, custom=ts(),
        overrides=[{"matcher": {"id": "byRegexp", "options": ".*acceptance"},
                    "properties": [{"id": "unit", "value": "percentunit"}, {"id": "custom.axisPlacement", "value": "right"}]}],
        desc="Acceptance = accepted / draft tokens; mean accepted length = 1 + accepted / drafts."))
    panels.append(length_heatmap(lay, sel, "Prompt length", "prompt", "prompt_tokens_le"))
    panels.append(length_heatmap(lay, sel, "Generation length", "generation", "generation_tokens_le"))

    panels.append(row(lay, "Alerts for this target"))
    panels.append(alerts_table(lay, tsel))

    gpu_row(lay, panels, tsel)

    panels.append(row(lay, "Scrape health"))
    health_panels(lay, panels, tsel)
    return dashboard(TARGET_DASH, "goodput: target drill-down", panels, templating(single_target=True),
                     link_to=(OVERVIEW_DASH, "Overview"))


def main():
    outputs = {"overview.json": render(overview()), "target.json": render(target()), "fleet.json": render(fleet(q))}
    stale = []
    for name, text in outputs.items():
        path = HERE / name
        if "--check" in sys.argv:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"stale: {', '.join(stale)}; run python3 dashboards/generate.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
