#!/usr/bin/env python3
"""Generates dashboards/overview.json and dashboards/target.json (Grafana JSON), from the
building blocks in dashboards/grafana.py, and dashboards/fleet.json (dashboards/fleet.py,
over the `llm_slo:` recording rules of `goodput rules`).

The JSON files are committed; edit this file and rerun it instead of editing them, and
scripts/ci/dashboards.sh fails if they differ from a fresh generation.
Metric names follow docs/metrics.md (families llm_slo_*, GPU, MFU and HBM included).
Queries that can legitimately be empty (no GPU in CI, no alert pending) carry
"goodputOptional": "<reason>" in their target; the PromQL check reports them but does not
fail on empty data. Those the demo has for some selections only (one engine's speculative
decoding, one SLO's e2e limit) also carry "goodputSomewhere": true, and must return data
for one of the selections the check tries.
usage: python3 dashboards/generate.py [--check]
"""
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ next to the committed JSON
from fleet import fleet  # noqa: E402
from grafana import (DS, Layout, bounds_style, dashboard, limit_style, mean_style,  # noqa: E402
                     panel, render, row, ts, variable_query)

HERE = Path(__file__).resolve().parent
SEL = 'target=~"$target", model=~"$model"'
WIN = 'window="$window"'
# Series of the last scrape (stat="last", the current KV band) carry no window label;
# an empty-matching regex keeps them next to the selected window's mean and max.
WIN_OR_LAST = 'window=~"$window|"'
SLO = 'slo=~"$slo"'
# The histogram-derived series; the request-derived ones beside them say source="tap"/"otlp".
MET = 'source="metrics"'
REQ = 'source=~"tap|otlp"'
REQUESTS = "requests: needs a tap or an OTLP receiver feeding request records"
GPU = "gpu: needs GPU telemetry (NVML or dcgm-exporter); CI has no GPU"
COST = "cost: needs cost.gpu_hour_dollars in the config"
SPEC = "spec: only when the engine runs speculative decoding"
ALERTS = "alerts: empty while nothing is pending or firing"
CAPACITY = "capacity: needs minutes of load that varied enough to fill a rate bin (docs/capacity.md)"
E2E_LIMIT = "e2e limit: only for SLOs with an e2e clause (the demo's batch SLO has one, chat has not)"
# Optional data the demo has for one of its engines or SLOs: the live check requires it for
# some selection of the variables ("goodputSomewhere").
IN_DEMO = {SPEC, E2E_LIMIT}
TARGET_DASH = "goodput-target"
OVERVIEW_DASH = "goodput-overview"


def q(expr, legend, ref, optional=None, instant=False, fmt=None):
    t = {"refId": ref, "datasource": DS, "expr": expr, "legendFormat": legend}
    if instant:
        t["instant"], t["range"] = True, False
    if fmt:
        t["format"] = fmt
    if optional:
        t["goodputOptional"] = optional
        if optional in IN_DEMO:
            t["goodputSomewhere"] = True
    return t


def slo_scope(sel):
    """Keeps an SLO's limits to the SLOs that judge the targets and models shown: the
    limits carry no target (docs/metrics.md#slo-and-kv-band-limits), the SLO's
    llm_slo_evaluable series do."""
    return f"and on (slo) group by (slo) (llm_slo_evaluable{{{sel}, {MET}, {SLO}, {WIN}}})"


def threshold_query(sel, clause):
    # Every SLO needs a clause, but not every clause: only e2e is missing from an SLO in the demo.
    return q(f'max by (slo) (llm_slo_threshold_seconds{{{SLO}, clause="{clause}"}}) {slo_scope(sel)}',
             "SLO {{slo}} %s limit" % clause, "X", E2E_LIMIT if clause == "e2e" else None)


def objective_query(sel):
    return q(f"max by (slo) (llm_slo_objective_ratio{{{SLO}}}) {slo_scope(sel)}", "SLO {{slo}} objective", "X")


def population(sel, family, goodput_family, extra=""):
    """`family` summed over the targets and models each SLO judges: the population its
    goodput is computed over, taken from the goodput series' own target and model labels."""
    return (f"sum by (slo) (sum by (target, model) ({family}{{{sel}{extra}, {WIN}}})"
            f" * on (target, model) group_right"
            f' group by (target, model, slo) ({goodput_family}{{{sel}, {MET}, {SLO}, bound="estimate", {WIN}}}))')


def templating(single_target):
    window = {
        "name": "window", "label": "Window", "type": "custom",
        "query": "1m,5m,15m,1h",
        "current": {"selected": True, "text": "5m", "value": "5m"},
        "options": [{"selected": w == "5m", "text": w, "value": w} for w in ("1m", "5m", "15m", "1h")],
        "multi": False, "includeAll": False,
    }
    return {"list": [
        {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
         "options": [], "refresh": 1},
        variable_query("target", "Target", "label_values(llm_slo_target_up, target)",
                       multi=not single_target, include_all=not single_target),
        variable_query("model", "Model",
                       'label_values(llm_slo_requests_per_second{target=~"$target"}, model)'),
        variable_query("slo", "SLO",
                       'label_values(llm_slo_attainment_ratio{target=~"$target", model=~"$model"}, slo)'),
        window,
    ]}


# The latency histograms an SLO clause can limit (ITL has no clause).
CLAUSES = ("ttft", "tpot", "e2e")


def latency_panel(lay, metric, title, quantiles, by, w=12):
    fam = f"llm_slo_{metric}_seconds"
    qsel = f'q=~"{quantiles}"'
    first = by.split(",")[0]
    targets = [
        q(f"max by ({by}, q) ({fam}{{{SEL}, {MET}, {qsel}, {WIN}}})", "{{%s}} p{{q}}" % first, "A"),
        q(f'max by ({by}, q, side) (llm_slo_quantile_bracket_seconds{{{SEL}, metric="{metric}", {qsel}, {WIN}}})',
          "{{%s}} p{{q}} bucket {{side}}" % first, "B"),
        q(f'max by ({by}) (llm_slo_latency_mean_seconds{{{SEL}, {MET}, metric="{metric}", {WIN}}})',
          "{{%s}} mean" % first, "C"),
    ]
    limit = ""
    if metric in CLAUSES:
        targets.append(threshold_query(SEL, metric))
        limit = " The red dashed line is each SLO's limit from the config (llm_slo_threshold_seconds)."
    return panel(
        lay, "timeseries", title, targets,
        w=w, unit="s", custom=ts(), overrides=bounds_style() + [mean_style(), limit_style("SLO .* limit")],
        desc=(f"PromQL-exact {metric.upper()} quantiles over the selected window, with the histogram "
              "bucket bounds that contain each one (dashed): the true quantile lies between them. "
              "Dotted: the mean (sum / count), far above p50 when the tail is long." + limit),
        links=[{"title": "Drill down into ${__field.labels.target}",
                "url": f"/d/{TARGET_DASH}/goodput-target?var-target=${{__field.labels.target}}&${{__url_time_range}}"}],
    )


def gpu_row(lay, panels, target_sel):
    panels.append(row(lay, "GPU, MFU and cost"))
    # Per-GPU families carry target only when goodput could tie the GPU to one target;
    # target=~"$target|" also keeps GPUs without the label.
    gsel = target_sel.replace('"$target"', '"$target|"').replace('target="', 'target=~"')
    panels.append(panel(lay, "timeseries", "GPU utilization",
                        [q(f"avg by (gpu, uuid, model_name) (llm_slo_gpu_utilization_ratio{{{gsel}}})",
                           "GPU {{gpu}} {{model_name}}", "A", GPU)],
                        w=6, unit="percentunit", minv=0, maxv=1, custom=ts(10),
                        desc="Share of time a kernel ran (NVML/DCGM): busy, not efficient. Empty without GPU telemetry."))
    panels.append(panel(lay, "timeseries", "GPU memory used",
                        [q(f"max by (gpu, uuid) (llm_slo_gpu_memory_used_bytes{{{gsel}}})", "GPU {{gpu}}", "A", GPU)],
                        w=6, unit="bytes", custom=ts(10),
                        desc="Device memory used. vLLM pre-allocates the KV cache, so this sits near --gpu-memory-utilization."))
    panels.append(panel(lay, "timeseries", "MFU (model FLOPs utilization)",
                        [q(f"max by (target, source) (llm_slo_mfu_ratio{{{target_sel}, model=~\"$model\", {WIN}}})",
                           "{{target}} ({{source}})", "A", GPU)],
                        w=6, unit="percentunit", minv=0, custom=ts(),
                        desc="Achieved FLOP/s over the GPU's dense peak. An unknown GPU gives no MFU rather than a guess."))
    panels.append(panel(lay, "timeseries", "HBM bandwidth utilization",
                        [q(f"max by (target, source) (llm_slo_hbm_bandwidth_utilization_ratio{{{target_sel}, model=~\"$model\", {WIN}}})",
                           "{{target}} ({{source}})", "A", GPU)],
                        w=6, unit="percentunit", minv=0, custom=ts(),
                        desc="Memory-bandwidth use. Decode is bandwidth-bound: high HBM use with TPOT near its floor means the GPU is the limit."))
    panels.append(panel(lay, "timeseries", "Decode TPOT floor vs measured p50 TPOT",
                        [q(f"max by (target) (llm_slo_decode_tpot_floor_seconds{{{target_sel}, model=~\"$model\", {WIN}}})",
                           "{{target}} floor (bytes per step / HBM bandwidth)", "A", GPU),
                         q(f'max by (target) (llm_slo_tpot_seconds{{{target_sel}, model=~"$model", {MET}, q="0.5", {WIN}}})',
                           "{{target}} measured p50", "B")],
                        w=12, unit="s", minv=0, custom=ts(),
                        desc="How far decode is from the memory-bandwidth floor. Far above it: batching, scheduling or contention, not the GPU."))
    panels.append(panel(lay, "timeseries", "Cost per million output tokens: all vs good",
                        [q(f'max by (target, kind, bound) (llm_slo_cost_dollars_per_million_tokens{{{target_sel}, model=~"$model", {WIN}}})',
                           "{{target}} {{kind}} {{bound}}", "A", COST)],
                        w=12, unit="currencyUSD", minv=0, custom=ts(), overrides=bounds_style(),
                        desc="$/M tokens hides the SLO; $/M good tokens counts only tokens of requests that met it."))


# Colours of the KV-cache bands, and of the limits between them (each limit is drawn in
# the colour of the band it opens).
KV_BAND_COLORS = {"underloaded": "blue", "low": "light-green", "target": "green",
                  "high": "orange", "critical": "red"}
KV_LIMIT_COLORS = {"underloaded": "blue", "target_low": "green", "target_high": "orange", "critical": "red"}


def kv_panels(lay, panels, sel, w=12):
    panels.append(panel(
        lay, "timeseries", "KV cache utilization against the configured bands",
        [q(f"max by (target, stat) (llm_slo_kv_cache_utilization_ratio{{{sel}, {WIN_OR_LAST}}})", "{{target}} {{stat}}", "A"),
         q("max by (limit) (llm_slo_kv_cache_band_limit_ratio)", "{{limit}} limit", "B")],
        w=w, unit="percentunit", minv=0, maxv=1, custom=ts(),
        overrides=[limit_style(f"{lim} limit", c) for lim, c in KV_LIMIT_COLORS.items()],
        desc=("Dashed: the band limits of kv_cache: in the config (llm_slo_kv_cache_band_limit_ratio). Below "
              "underloaded the engine has room for more; between target_low and target_high it is in its "
              "target band; above critical, preemption and swap risk rises.")))
    panels.append(panel(
        lay, "timeseries", "Time in each KV-cache band",
        [q(f"avg by (band) (llm_slo_kv_cache_band_time_ratio{{{sel}, {WIN}}})", "{{band}}", "A")],
        w=w, unit="percentunit", minv=0, maxv=1, custom=ts(fill=80, stack="normal"),
        overrides=[{"matcher": {"id": "byName", "options": b},
                    "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": c}}]}
                   for b, c in KV_BAND_COLORS.items()],
        desc=("Share of the window spent in each band: underloaded < underloaded limit <= low < target_low "
              "<= target <= target_high < high <= critical < critical. The limits are the dashed lines on the "
              "utilization panel.")))


def saturation_panels(lay, panels, sel, w=8):
    panels.append(panel(
        lay, "timeseries", "Requests running and waiting",
        [q(f'max by (target) (llm_slo_requests_running{{{sel}, stat="last"}})', "{{target}} running", "A"),
         q(f'max by (target) (llm_slo_requests_waiting{{{sel}, stat="last"}})', "{{target}} waiting", "B")],
        w=w, unit="short", minv=0, custom=ts(),
        desc="A waiting queue that keeps growing means arrivals exceed what the engine can batch."))
    panels.append(panel(
        lay, "timeseries", "Preemptions/s",
        [q(f"sum by (target) (llm_slo_preemptions_per_second{{{sel}, {WIN}}})", "{{target}}", "A")],
        w=w, unit="short", minv=0, custom=ts(),
        desc="Requests evicted from the KV cache and recomputed: the cost of running the KV cache too full."))
    panels.append(panel(
        lay, "timeseries", "TTFT breakdown (means)",
        [q(f'max by (component) (llm_slo_ttft_component_mean_seconds{{{sel}, component=~"queue|prefill|other", {WIN}}})',
           "{{component}}", "A")],
        w=w, unit="s", minv=0, custom=ts(fill=60, stack="normal"),
        desc="Mean TTFT split into queueing, prefill, and the rest (API server, tokenization). Means only, not quantiles."))


def capacity_panels(lay, panels, sel):
    """Capacity against the current load (docs/capacity.md): the estimate with its spread,
    the headroom the alert reads, and the saturation signal."""
    panels.append(panel(
        lay, "timeseries", "Capacity against arrivals",
        [q(f"max by (slo, q, bound, censored) (llm_slo_capacity_request_rate{{{sel}, {SLO}}})",
           "capacity {{slo}} q{{q}} {{bound}} censored={{censored}}", "A", CAPACITY),
         q(f"sum by (model) (llm_slo_capacity_arrival_rate{{{sel}}})", "arrivals {{model}}", "B")],
        w=12, unit="reqps", minv=0, custom=ts(),
        desc=("The highest arrival rate at which the SLO was still met (q 0.1 / 0.5 / 0.9; from histograms, both ends "
              "of the bracket), against the arrivals now. censored=true: no failing load seen yet, a lower bound.")))
    panels.append(panel(
        lay, "timeseries", "Capacity headroom",
        [q(f"min by (slo) (llm_slo_capacity_headroom_ratio{{{sel}, {SLO}}})", "{{slo}}", "A", CAPACITY)],
        w=6, unit="x", minv=0, custom=ts(threshold_style="line"), steps=[("red", None), ("orange", 1), ("transparent", 1.2)],
        desc="Conservative capacity over the current arrival rate; LLMCapacityHeadroomLow fires under 1.2 while arrivals rise."))
    panels.append(panel(
        lay, "timeseries", "Saturated, by reason",
        [q(f"max by (reason) (llm_slo_saturated{{{sel}}})", "{{reason}}", "A")],
        w=6, unit="short", minv=0, maxv=1, custom=ts(fill=60, stack="normal"),
        desc="1 while the queue grows and completions lag arrivals (with hysteresis), per reason behind it."))


def finish_reason_panel(lay, sel, w=12):
    return panel(
        lay, "timeseries", "Finished requests/s by finish reason",
        [q(f"sum by (finished_reason) (llm_slo_finished_requests_per_second{{{sel}, {WIN}}})", "{{finished_reason}}", "A")],
        w=w, unit="reqps", minv=0, custom=ts(fill=60, stack="normal"),
        overrides=[{"matcher": {"id": "byName", "options": r},
                    "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": c}}]}
                   for r, c in (("stop", "green"), ("length", "yellow"), ("abort", "orange"), ("error", "red"))],
        desc=("The engine's reason each request ended: stop (end of sequence, a stop string), length (max_tokens "
              "or the context: outputs cut off), abort (the client left), error."))


def length_heatmap(lay, sel, title, what, label):
    """A token-length distribution over time, like vLLM's dashboard draws it, from the
    cumulative shares goodput exports (Grafana de-accumulates buckets labelled le)."""
    share = f"llm_slo_{what}_length_cumulative_ratio"
    expr = f'max by (le) (label_replace(avg by ({label}) ({share}{{{sel}, {WIN}}}), "le", "$1", "{label}", "(.*)"))'
    return panel(
        lay, "heatmap", f"{title} distribution (tokens)",
        [q(expr, "{{le}}", "A", fmt="heatmap")],
        w=12, h=8,
        options={"calculate": False, "cellGap": 1, "rowsFrame": {"layout": "le"},
                 "yAxis": {"axisPlacement": "left", "unit": "short"},
                 "cellValues": {"unit": "percentunit", "decimals": 1},
                 "color": {"mode": "scheme", "scheme": "Oranges", "fill": "dark-orange", "scale": "exponential",
                           "exponent": 0.5, "steps": 64, "reverse": False},
                 "filterValues": {"le": 1e-9}, "showValue": "never",
                 "tooltip": {"mode": "single", "yHistogram": False}, "legend": {"show": True}},
        desc=(f"Share of the requests finished in the window by {what} length, per token bucket of the engine's "
              f"histogram ({share}). Prefill cost grows with prompt length, decode time with generation length."))


def health_panels(lay, panels, tsel, w=8):
    panels.append(panel(lay, "timeseries", "Target up",
                        [q(f"max by (target) (llm_slo_target_up{{{tsel}}})", "{{target}}", "A")],
                        w=w, minv=0, maxv=1, custom=ts(), steps=[("red", None), ("green", 1)]))
    panels.append(panel(lay, "timeseries", "Scrape duration",
                        [q(f"max by (target) (llm_slo_scrape_duration_seconds{{{tsel}}})", "{{target}}", "A")],
                        w=w, unit="s", custom=ts()))
    # Every reason exists at 0 from the start: one total per target, plus the reasons that
    # are actually failing (not eleven flat zeros per target).
    panels.append(panel(lay, "timeseries", "Scrape errors",
                        [q(f"sum by (target, reason) (rate(llm_slo_scrape_errors_total{{{tsel}}}[$__rate_interval])) > 0"
                           f" or sum by (target) (rate(llm_slo_scrape_errors_total{{{tsel}}}[$__rate_interval]))",
                           "{{target}} {{reason}}", "A")],
                        w=w, unit="reqps", custom=ts()))


def alerts_table(lay, tsel, w=24, h=7):
    return panel(
        lay, "table", "Pending and firing alerts",
        [q(f"max by (alertname, severity, state, target, model, slo) (llm_slo_alert{{{tsel}}})", "", "A",
           ALERTS, instant=True, fmt="table")],
        w=w, h=h, options={"showHeader": True, "sortBy": [{"displayName": "severity", "desc": False}]},
        desc="Alerts goodput evaluates itself (same state machine as Prometheus ALERTS).")


def exact_panels(lay, panels, sel):
    """Values from the requests a tap or engine spans measured, beside the histogram bracket."""
    panels.append(panel(
        lay, "timeseries", "Joint attainment: exact from requests vs histogram bracket",
        [q(f'min by (source) (llm_slo_attainment_ratio{{{sel}, {REQ}, {SLO}, clause="joint", bound="estimate", {WIN}}})',
           "{{source}} exact", "A", REQUESTS),
         q(f'min by (bound) (llm_slo_attainment_ratio{{{sel}, {MET}, {SLO}, clause="joint", bound=~"lower|upper", {WIN}}})',
           "metrics {{bound}}", "B"),
         objective_query(sel)],
        w=8, unit="percentunit", maxv=1, custom=ts(), overrides=bounds_style() + [limit_style("SLO .* objective")],
        desc=("Per-request attainment from the tap (what clients see) or engine spans; failures count as bad. "
              "Dashed: the bracket /metrics histograms allow. The exact value lies inside it unless the tap "
              "sees what the engine does not (queueing in front of it, rejections).")))
    panels.append(panel(
        lay, "timeseries", "Requests measured by outcome",
        [q(f"sum by (source, status) (rate(llm_slo_requests_total{{{sel}, {REQ}}}[$__rate_interval]))",
           "{{source}} {{status}}", "A", REQUESTS)],
        w=8, unit="reqps", custom=ts(),
        desc="ok, http_<code>, stream_error (error event under HTTP 200), client_abort, upstream_reset, truncated."))
    panels.append(panel(
        lay, "timeseries", "Client TTFT minus engine TTFT",
        [q(f'max by (reference) (llm_slo_ttft_gap_seconds{{{sel}, stat="mean", {WIN}}})', "mean vs {{reference}}", "A", REQUESTS),
         q(f'max by (reference) (llm_slo_ttft_gap_seconds{{{sel}, stat="quantile", q="0.99", {WIN}}})',
           "p99 vs {{reference}}", "B", REQUESTS)],
        w=8, unit="s", custom=ts(),
        desc=("Time outside the engine that engine metrics never show: network, proxies, the HTTP server. "
              "Differences of means and of quantiles, not per-request differences.")))


def goodput_panels(lay, panels, sel, joint_title, joint_desc):
    """Joint attainment against the objective, and goodput beside the throughput of the
    same population (the targets and models each SLO judges)."""
    panels.append(panel(
        lay, "timeseries", joint_title,
        [q(f'min by (slo, bound) (llm_slo_attainment_ratio{{{sel}, {MET}, {SLO}, clause="joint", {WIN}}})', "{{slo}} {{bound}}", "A"),
         objective_query(sel)],
        unit="percentunit", maxv=1, custom=ts(), overrides=bounds_style() + [limit_style("SLO .* objective")],
        desc=((joint_desc + " ") if joint_desc else "") + "Red dashed: each SLO's objective from the config."))
    panels.append(panel(
        lay, "timeseries", "Output tokens/s: throughput vs goodput, per SLO population",
        [q(population(sel, "llm_slo_tokens_per_second", "llm_slo_goodput_tokens_per_second", ', direction="output"'),
           "throughput {{slo}}", "A"),
         q(f"sum by (slo, bound) (llm_slo_goodput_tokens_per_second{{{sel}, {MET}, {SLO}, {WIN}}})", "goodput {{slo}} {{bound}}", "B")],
        unit="short", custom=ts(), overrides=bounds_style(),
        desc=("Only tokens of requests meeting the SLO count. Throughput is summed over the same targets and models "
              "as the SLO's goodput, so the two lines compare. Near saturation throughput keeps rising while "
              "goodput falls: that gap is the production ceiling. /metrics marginals bound goodput; they do not pin it.")))
    panels.append(panel(
        lay, "timeseries", "Requests/s: all vs good, per SLO population",
        [q(population(sel, "llm_slo_requests_per_second", "llm_slo_goodput_requests_per_second"), "all {{slo}}", "A"),
         q(f"sum by (slo, bound) (llm_slo_goodput_requests_per_second{{{sel}, {MET}, {SLO}, {WIN}}})", "good {{slo}} {{bound}}", "B")],
        unit="reqps", custom=ts(), overrides=bounds_style(),
        desc="Finished requests of the targets and models the SLO judges, and those of them that met it."))


def preferred_budget(family, sel, bound):
    """The budget family from the tap, else the OTLP spans, else the histograms (docs/metrics.md)."""
    parts = [f'{family}{{{sel}, {SLO}, source="{src}", {bound}}}' for src in ("tap", "otlp", "metrics")]
    return " or ignoring(source) ".join(parts)


def budget_panels(lay, panels, sel, by):
    """Error budget over each SLO's period (slos[].period, 28 days by default); `by` is the
    grouping of the time series ("slo" on a target's dashboard, "target, slo" across targets)."""
    panels.append(row(lay, "Error budget over the SLO period"))
    remaining = "llm_slo_error_budget_remaining_ratio"
    estimate = preferred_budget(remaining, sel, 'bound="estimate"')
    bounded = preferred_budget(remaining, sel, 'bound=~"lower|estimate|upper"')
    legend = "".join("{{%s}} " % label.strip() for label in by.split(",")) + "{{bound}}"
    panels.append(panel(
        lay, "stat", "Error budget left over the period (worst, estimate)",
        [q(f"min by (slo) ({estimate})", "{{slo}}", "A")],
        w=8, h=6, unit="percentunit", steps=[("red", None), ("orange", 0), ("green", 0.25)],
        desc=("1 - (1 - attainment over the period) / (1 - objective); below 0 once overspent. From the tap "
              "where there is one, else engine spans, else the histograms.")))
    panels.append(panel(
        lay, "timeseries", "Error budget left, with bounds",
        [q(f"min by ({by}, bound) ({bounded})", legend, "A")],
        w=10, h=6, unit="percentunit", maxv=1, custom=ts(threshold_style="line"), overrides=bounds_style(),
        steps=[("red", None), ("transparent", 0)]))
    panels.append(panel(
        lay, "stat", "Period covered by data",
        [q(f"min by (slo) (llm_slo_error_budget_period_coverage_ratio{{{sel}, {SLO}}})", "{{slo}}", "A")],
        w=6, h=6, unit="percentunit", steps=[("orange", None), ("green", 1)],
        desc="Below 100 % until the daemon has counted a whole period: its counts start when it does."))


def overview():
    lay, panels = Layout(), []
    tsel = 'target=~"$target"'
    panels.append(row(lay, "Service level"))
    panels.append(panel(
        lay, "stat", "Joint SLO attainment (worst target, estimate)",
        [q(f'min by (slo) (llm_slo_attainment_ratio{{{SEL}, {MET}, {SLO}, clause="joint", bound="estimate", {WIN}}})', "{{slo}}", "A")],
        w=8, h=5, unit="percentunit", steps=[("red", None), ("orange", 0.95), ("green", 0.99)],
        desc="Share of requests meeting every clause of the SLO (independence estimate; bounds below)."))
    panels.append(panel(
        lay, "stat", "Highest error-budget burn rate",
        [q(f'max by (slo) (llm_slo_error_budget_burn_rate{{{SEL}, {MET}, {SLO}, bound="estimate", {WIN}}})', "{{slo}}", "A")],
        w=8, h=5, unit="x", steps=[("green", None), ("orange", 6), ("red", 14.4)],
        desc="(1 - attainment) / (1 - objective). 14.4x over 1h spends 2 % of a 30-day budget."))
    panels.append(panel(
        lay, "stat", "Firing alerts",
        [q(f'count(llm_slo_alert{{{tsel}, state="firing"}}) or vector(0)', "firing", "A")],
        w=4, h=5, steps=[("green", None), ("red", 1)]))
    panels.append(panel(
        lay, "stat", "Targets up",
        [q(f"sum(llm_slo_target_up{{{tsel}}}) / count(llm_slo_target_up{{{tsel}}})", "up", "A")],
        w=4, h=5, unit="percentunit", steps=[("red", None), ("orange", 0.5), ("green", 1)]))
    budget_panels(lay, panels, SEL, "target, slo")

    panels.append(row(lay, "Goodput against throughput"))
    goodput_panels(lay, panels, SEL, "Joint SLO attainment with bounds (worst target)",
                   "Lower max(0, p_ttft + p_tpot - 1), upper min(p_ttft, p_tpot), estimate p_ttft x p_tpot.")
    panels.append(panel(
        lay, "timeseries", "Error-budget burn rate by window",
        [q(f'max by (slo, window) (llm_slo_error_budget_burn_rate{{{SEL}, {MET}, {SLO}, bound="estimate"}})', "{{slo}} {{window}}", "A")],
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
        [q(f'max by (q) (llm_slo_e2e_seconds{{{SEL}, {MET}, q=~"0.5|0.9|0.99", {WIN}}})', "p{{q}}", "A"),
         q(f'max(llm_slo_latency_mean_seconds{{{SEL}, {MET}, metric="e2e", {WIN}}})', "worst target mean", "B"),
         threshold_query(SEL, "e2e")],
        w=8, unit="s", custom=ts(), overrides=[mean_style(), limit_style("SLO .* limit")],
        desc="The worst target's quantiles and mean; red dashed: each SLO's E2E limit from the config."))
    panels.append(panel(
        lay, "timeseries", "Token throughput by direction",
        [q(f"sum by (direction) (llm_slo_tokens_per_second{{{SEL}, {WIN}}})", "{{direction}}", "A")],
        w=8, unit="short", custom=ts(),
        desc="input = prefill (compute-bound), output = decode (memory-bandwidth-bound)."))
    panels.append(finish_reason_panel(lay, SEL, w=8))

    panels.append(row(lay, "KV cache"))
    kv_panels(lay, panels, SEL)

    panels.append(row(lay, "Saturation"))
    saturation_panels(lay, panels, SEL)

    panels.append(row(lay, "Alerts"))
    panels.append(alerts_table(lay, tsel))

    gpu_row(lay, panels, tsel)

    panels.append(row(lay, "Scrape health"))
    health_panels(lay, panels, tsel)
    return dashboard(OVERVIEW_DASH, "goodput: LLM SLOs overview", panels, templating(single_target=False),
                     link_to=(TARGET_DASH, "Per-target drill-down"))


def target():
    lay, panels = Layout(), []
    sel = 'target="$target", model=~"$model"'
    tsel = 'target="$target"'
    panels.append(row(lay, "SLO attainment and goodput"))
    panels.append(panel(
        lay, "timeseries", "Per-clause attainment with brackets",
        [q(f'min by (slo, clause, bound) (llm_slo_attainment_ratio{{{sel}, {MET}, {SLO}, clause!="joint", {WIN}}})',
           "{{slo}} {{clause}} {{bound}}", "A"),
         objective_query(sel)],
        unit="percentunit", maxv=1, custom=ts(), overrides=bounds_style() + [limit_style("SLO .* objective")],
        desc=("Exact when the SLO threshold is a histogram bucket boundary (lower = upper); otherwise the truth "
              "lies between lower and upper and the estimate interpolates linearly.")))
    goodput_panels(lay, panels, sel, "Joint attainment: lower / estimate / upper", None)
    panels.append(panel(
        lay, "timeseries", "Error-budget burn rate, every window",
        [q(f"max by (slo, window, bound) (llm_slo_error_budget_burn_rate{{{sel}, {MET}, {SLO}}})", "{{slo}} {{window}} {{bound}}", "A")],
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
        [q(f"sum by (direction) (llm_slo_tokens_per_second{{{sel}, {WIN}}})", "{{direction}}", "A")],
        unit="short", custom=ts()))
    panels.append(finish_reason_panel(lay, sel))
    kv_panels(lay, panels, sel)

    panels.append(row(lay, "Saturation and request shape"))
    capacity_panels(lay, panels, sel)
    saturation_panels(lay, panels, sel)
    panels.append(panel(
        lay, "timeseries", "Mean prompt and output length",
        [q(f"max by (direction) (llm_slo_request_tokens_mean{{{sel}, {WIN}}})", "{{direction}} tokens", "A")],
        w=8, unit="short", minv=0, custom=ts(),
        desc="Prefill-heavy (long prompts) and decode-heavy (long outputs) traffic stress different limits."))
    panels.append(length_heatmap(lay, sel, "Prompt length", "prompt", "prompt_tokens_le"))
    panels.append(length_heatmap(lay, sel, "Generation length", "generation", "generation_tokens_le"))
    panels.append(panel(
        lay, "timeseries", "Prefix-cache hit ratio",
        [q(f"max by (model) (llm_slo_prefix_cache_hit_ratio{{{sel}, {WIN}}})", "{{model}}", "A")],
        w=8, unit="percentunit", minv=0, maxv=1, custom=ts()))
    panels.append(panel(
        lay, "timeseries", "Speculative decoding: acceptance and mean accepted length",
        [q(f"max by (model) (llm_slo_spec_decode_acceptance_ratio{{{sel}, {WIN}}})", "{{model}} acceptance", "A", SPEC),
         q(f"max by (model) (llm_slo_spec_decode_mean_accepted_length{{{sel}, {WIN}}})", "{{model}} mean accepted length", "B", SPEC)],
        w=8, unit="short", minv=0, custom=ts(),
        overrides=[{"matcher": {"id": "byRegexp", "options": ".*acceptance"},
                    "properties": [{"id": "unit", "value": "percentunit"}, {"id": "custom.axisPlacement", "value": "right"}]}],
        desc="Acceptance = accepted / draft tokens; mean accepted length = 1 + accepted / drafts."))

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
