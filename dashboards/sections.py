"""Panel groups shared by the per-target dashboards (dashboards/generate.py): latency,
goodput, error budget, exact values from requests, KV cache, saturation, capacity, GPU,
alerts and scrape health. Every query groups by the replica identity (queries.IDENTITY) and
every legend starts with the pod; stacked panels and heatmaps, where two replicas' series
would add up or collide, repeat once per pod instead.
"""
from grafana import bounds_style, limit_style, mean_style, panel, repeat, row, ts
from queries import (ALERTS, CAPACITY, COST, GPU, LIMIT, MET, REPLICA, REQ, REQUESTS, SEL, SLO, TARGET_DASH, TTFT_GAP, WHO, WIN, WIN_OR_LAST, by, objective_query, population,
                     preferred_budget, q, threshold_query)

# The latency histograms an SLO clause can limit (ITL has no clause).
CLAUSES = ("ttft", "tpot", "e2e")


def latency_panel(lay, metric, title, quantiles, group, w=12):
    """`group` is what a line is per besides the replica ("target, model" or "model")."""
    fam = f"llm_slo_{metric}_seconds"
    qsel = f'q=~"{quantiles}"'
    first = WHO + "{{%s}}" % group.split(",")[0]
    targets = [
        q(f"max by ({by(group, 'q')}) ({fam}{{{SEL}, {MET}, {qsel}, {WIN}}})", first + " p{{q}}", "A"),
        q(f'max by ({by(group, "q", "side")}) (llm_slo_quantile_bracket_seconds{{{SEL}, metric="{metric}", {qsel}, {WIN}}})',
          first + " p{{q}} bucket {{side}}", "B"),
        q(f'max by ({by(group)}) (llm_slo_latency_mean_seconds{{{SEL}, {MET}, metric="{metric}", {WIN}}})',
          first + " mean", "C"),
    ]
    limit = ""
    if metric in CLAUSES:
        targets.append(threshold_query(SEL, metric))
        limit = " The red dashed line is each SLO's limit from the config (llm_slo_threshold_seconds)."
    drill = ("var-namespace=${__field.labels.namespace}&var-pod=${__field.labels.pod}"
             "&var-target=${__field.labels.target}")
    return panel(
        lay, "timeseries", title, targets,
        w=w, unit="s", custom=ts(), overrides=bounds_style() + [mean_style(), limit_style("SLO .* limit")],
        desc=(f"PromQL-exact {metric.upper()} quantiles over the selected window, with the histogram "
              "bucket bounds that contain each one (dashed): the true quantile lies between them. "
              "Dotted: the mean (sum / count), far above p50 when the tail is long." + limit),
        links=[{"title": "Drill down into ${__field.labels.pod} ${__field.labels.target}",
                "url": f"/d/{TARGET_DASH}/goodput-target?{drill}&${{__url_time_range}}"}],
    )


def gpu_row(lay, panels, target_sel):
    panels.append(row(lay, "GPU, MFU and cost"))
    # Per-GPU families carry target only when goodput could tie the GPU to one target;
    # target=~"$target|" also keeps GPUs without the label.
    gsel = target_sel.replace('"$target"', '"$target|"').replace('target="', 'target=~"')
    msel = f'{target_sel}, model=~"$model", {WIN}'
    panels.append(panel(lay, "timeseries", "GPU utilization",
                        [q(f"avg by ({by('gpu', 'uuid', 'model_name')}) (llm_slo_gpu_utilization_ratio{{{gsel}}})",
                           WHO + "GPU {{gpu}} {{model_name}}", "A", GPU)],
                        w=6, unit="percentunit", minv=0, maxv=1, custom=ts(10),
                        desc="Share of time a kernel ran (NVML/DCGM): busy, not efficient. Empty without GPU telemetry."))
    panels.append(panel(lay, "timeseries", "GPU memory used",
                        [q(f"max by ({by('gpu', 'uuid')}) (llm_slo_gpu_memory_used_bytes{{{gsel}}})",
                           WHO + "GPU {{gpu}}", "A", GPU)],
                        w=6, unit="bytes", custom=ts(10),
                        desc="Device memory used. vLLM pre-allocates the KV cache, so this sits near --gpu-memory-utilization."))
    panels.append(panel(lay, "timeseries", "MFU (model FLOPs utilization)",
                        [q(f"max by ({by('target', 'source')}) (llm_slo_mfu_ratio{{{msel}}})",
                           WHO + "{{target}} ({{source}})", "A", GPU)],
                        w=6, unit="percentunit", minv=0, custom=ts(),
                        desc="Achieved FLOP/s over the GPU's dense peak. An unknown GPU gives no MFU rather than a guess."))
    panels.append(panel(lay, "timeseries", "HBM bandwidth utilization",
                        [q(f"max by ({by('target', 'source')}) (llm_slo_hbm_bandwidth_utilization_ratio{{{msel}}})",
                           WHO + "{{target}} ({{source}})", "A", GPU)],
                        w=6, unit="percentunit", minv=0, custom=ts(),
                        desc="Memory-bandwidth use. Decode is bandwidth-bound: high HBM use with TPOT near its floor means the GPU is the limit."))
    panels.append(panel(lay, "timeseries", "Decode TPOT floor vs measured p50 TPOT",
                        [q(f"max by ({by('target')}) (llm_slo_decode_tpot_floor_seconds{{{msel}}})",
                           WHO + "{{target}} floor (bytes per step / HBM bandwidth)", "A", GPU),
                         q(f'max by ({by("target")}) (llm_slo_tpot_seconds{{{msel}, {MET}, q="0.5"}})',
                           WHO + "{{target}} measured p50", "B")],
                        w=12, unit="s", minv=0, custom=ts(),
                        desc="How far decode is from the memory-bandwidth floor. Far above it: batching, scheduling or contention, not the GPU."))
    panels.append(panel(lay, "timeseries", "Cost per million output tokens: all vs good",
                        [q(f"max by ({by('target', 'kind', 'bound')}) (llm_slo_cost_dollars_per_million_tokens{{{msel}}})",
                           WHO + "{{target}} {{kind}} {{bound}}", "A", COST)],
                        w=12, unit="currencyUSD", minv=0, custom=ts(), overrides=bounds_style(),
                        desc="$/M tokens hides the SLO; $/M good tokens counts only tokens of requests that met it."))


# Colours of the KV-cache bands, and of the limits between them (each limit is drawn in
# the colour of the band it opens).
KV_BAND_COLORS = {"underloaded": "blue", "low": "light-green", "target": "green",
                  "high": "orange", "critical": "red"}
KV_LIMIT_COLORS = {"underloaded": "blue", "target_low": "green", "target_high": "orange", "critical": "red"}


def fixed_colors(colors):
    return [{"matcher": {"id": "byName", "options": name},
             "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": c}}]}
            for name, c in colors.items()]


def kv_panels(lay, panels, sel):
    panels.append(panel(
        lay, "timeseries", "KV cache utilization against the configured bands",
        [q(f"max by ({by('target', 'stat')}) (llm_slo_kv_cache_utilization_ratio{{{sel}, {WIN_OR_LAST}}})",
           WHO + "{{target}} {{stat}}", "A"),
         q(f"max by (limit) (llm_slo_kv_cache_band_limit_ratio{{{REPLICA}}})", "{{limit}} limit", "B", across=LIMIT)],
        w=24, unit="percentunit", minv=0, maxv=1, custom=ts(),
        overrides=[limit_style(f"{lim} limit", c) for lim, c in KV_LIMIT_COLORS.items()],
        desc=("Dashed: the band limits of kv_cache: in the config (llm_slo_kv_cache_band_limit_ratio). Below "
              "underloaded the engine has room for more; between target_low and target_high it is in its "
              "target band; above critical, preemption and swap risk rises.")))
    panels.append(repeat(panel(
        lay, "timeseries", "Time in each KV-cache band: $pod",
        [q(f"avg by ({by('band')}) (llm_slo_kv_cache_band_time_ratio{{{sel}, {WIN}}})", "{{band}}", "A")],
        w=24, unit="percentunit", minv=0, maxv=1, custom=ts(fill=80, stack="normal"),
        overrides=fixed_colors(KV_BAND_COLORS),
        desc=("Share of the window spent in each band, one panel per pod: underloaded < underloaded limit <= low "
              "< target_low <= target <= target_high < high <= critical < critical. The limits are the dashed "
              "lines on the utilization panel.")), "pod", per_row=2))


def saturation_panels(lay, panels, sel, w=12):
    panels.append(panel(
        lay, "timeseries", "Requests running and waiting",
        [q(f'max by ({by("target")}) (llm_slo_requests_running{{{sel}, stat="last"}})', WHO + "{{target}} running", "A"),
         q(f'max by ({by("target")}) (llm_slo_requests_waiting{{{sel}, stat="last"}})', WHO + "{{target}} waiting", "B")],
        w=w, unit="short", minv=0, custom=ts(),
        desc="A waiting queue that keeps growing means arrivals exceed what the engine can batch."))
    panels.append(panel(
        lay, "timeseries", "Preemptions/s",
        [q(f"sum by ({by('target')}) (llm_slo_preemptions_per_second{{{sel}, {WIN}}})", WHO + "{{target}}", "A")],
        w=w, unit="short", minv=0, custom=ts(),
        desc="Requests evicted from the KV cache and recomputed: the cost of running the KV cache too full."))
    panels.append(repeat(panel(
        lay, "timeseries", "TTFT breakdown (means): $pod",
        [q(f'max by ({by("component")}) (llm_slo_ttft_component_mean_seconds{{{sel}, component=~"queue|prefill|other", {WIN}}})',
           "{{component}}", "A")],
        w=24, unit="s", minv=0, custom=ts(fill=60, stack="normal"),
        desc=("Mean TTFT split into queueing, prefill, and the rest (API server, tokenization), one panel per pod. "
              "Means only, not quantiles.")), "pod", per_row=3))


def capacity_panels(lay, panels, sel):
    """Capacity against the current load (docs/capacity.md): the estimate with its spread,
    the headroom the alert reads, and the saturation signal."""
    panels.append(panel(
        lay, "timeseries", "Capacity against arrivals",
        [q(f"max by ({by('slo', 'q', 'bound', 'censored')}) (llm_slo_capacity_request_rate{{{sel}, {SLO}}})",
           WHO + "capacity {{slo}} q{{q}} {{bound}} censored={{censored}}", "A", CAPACITY),
         q(f"sum by ({by('model')}) (llm_slo_capacity_arrival_rate{{{sel}}})", WHO + "arrivals {{model}}", "B")],
        w=12, unit="reqps", minv=0, custom=ts(),
        desc=("The highest arrival rate at which the SLO was still met (q 0.1 / 0.5 / 0.9; from histograms, both ends "
              "of the bracket), against the arrivals now. censored=true: no failing load seen yet, a lower bound.")))
    panels.append(panel(
        lay, "timeseries", "Capacity headroom",
        [q(f"min by ({by('slo')}) (llm_slo_capacity_headroom_ratio{{{sel}, {SLO}}})", WHO + "{{slo}}", "A", CAPACITY)],
        w=12, unit="x", minv=0, custom=ts(threshold_style="line"), steps=[("red", None), ("orange", 1), ("transparent", 1.2)],
        desc="Conservative capacity over the current arrival rate; LLMCapacityHeadroomLow fires under 1.2 while arrivals rise."))
    panels.append(repeat(panel(
        lay, "timeseries", "Saturated, by reason: $pod",
        [q(f"max by ({by('reason')}) (llm_slo_saturated{{{sel}}})", "{{reason}}", "A")],
        w=24, unit="short", minv=0, maxv=1, custom=ts(fill=60, stack="normal"),
        desc="1 while the queue grows and completions lag arrivals (with hysteresis), per reason behind it; one panel per pod."),
        "pod", per_row=4))


def finish_reason_panel(lay, sel, per_row=3):
    return repeat(panel(
        lay, "timeseries", "Finished requests/s by finish reason: $pod",
        [q(f"sum by ({by('finished_reason')}) (llm_slo_finished_requests_per_second{{{sel}, {WIN}}})",
           "{{finished_reason}}", "A")],
        w=24, unit="reqps", minv=0, custom=ts(fill=60, stack="normal"),
        overrides=fixed_colors({"stop": "green", "length": "yellow", "abort": "orange", "error": "red"}),
        desc=("The engine's reason each request ended, one panel per pod: stop (end of sequence, a stop string), "
              "length (max_tokens or the context: outputs cut off), abort (the client left), error.")),
        "pod", per_row=per_row)


def length_heatmap(lay, sel, title, what, label):
    """A token-length distribution over time, like vLLM's dashboard draws it, from the
    cumulative shares goodput exports (Grafana de-accumulates buckets labelled le). One
    heatmap per pod: two replicas' buckets in one heatmap would collide."""
    share = f"llm_slo_{what}_length_cumulative_ratio"
    expr = (f'max by ({by("le")}) (label_replace(avg by ({by(label)}) ({share}{{{sel}, {WIN}}}),'
            f' "le", "$1", "{label}", "(.*)"))')
    return repeat(panel(
        lay, "heatmap", f"{title} distribution (tokens): $pod",
        [q(expr, "{{le}}", "A", fmt="heatmap")],
        w=24, h=8,
        options={"calculate": False, "cellGap": 1, "rowsFrame": {"layout": "le"},
                 "yAxis": {"axisPlacement": "left", "unit": "short"},
                 "cellValues": {"unit": "percentunit", "decimals": 1},
                 "color": {"mode": "scheme", "scheme": "Oranges", "fill": "dark-orange", "scale": "exponential",
                           "exponent": 0.5, "steps": 64, "reverse": False},
                 "filterValues": {"le": 1e-9}, "showValue": "never",
                 "tooltip": {"mode": "single", "yHistogram": False}, "legend": {"show": True}},
        desc=(f"Share of the requests finished in the window by {what} length, per token bucket of the engine's "
              f"histogram ({share}). Prefill cost grows with prompt length, decode time with generation length.")),
        "pod", per_row=2)


def health_panels(lay, panels, tsel, w=8):
    panels.append(panel(lay, "timeseries", "Target up, per replica",
                        [q(f"max by ({by('target')}) (llm_slo_target_up{{{tsel}}})", WHO + "{{target}}", "A")],
                        w=w, minv=0, maxv=1, custom=ts(), steps=[("red", None), ("green", 1)],
                        desc="1 while the last scrape of the target succeeded, one line per replica and target."))
    panels.append(panel(lay, "timeseries", "Scrape duration",
                        [q(f"max by ({by('target')}) (llm_slo_scrape_duration_seconds{{{tsel}}})", WHO + "{{target}}", "A")],
                        w=w, unit="s", custom=ts()))
    # Every reason exists at 0 from the start: one total per target, plus the reasons that
    # are actually failing (not eleven flat zeros per target).
    panels.append(panel(lay, "timeseries", "Scrape errors",
                        [q(f"sum by ({by('target', 'reason')}) (rate(llm_slo_scrape_errors_total{{{tsel}}}[$__rate_interval])) > 0"
                           f" or sum by ({by('target')}) (rate(llm_slo_scrape_errors_total{{{tsel}}}[$__rate_interval]))",
                           WHO + "{{target}} {{reason}}", "A")],
                        w=w, unit="reqps", custom=ts()))


def alerts_table(lay, tsel, w=24, h=7):
    return panel(
        lay, "table", "Pending and firing alerts",
        [q(f"max by ({by('alertname', 'severity', 'state', 'target', 'model', 'slo')}) (llm_slo_alert{{{tsel}}})",
           "", "A", ALERTS, instant=True, fmt="table")],
        w=w, h=h, options={"showHeader": True, "sortBy": [{"displayName": "severity", "desc": False}]},
        desc="Alerts goodput evaluates itself (same state machine as Prometheus ALERTS), per replica.")


def exact_panels(lay, panels, sel):
    """Values from the requests a tap or engine spans measured, beside the histogram bracket."""
    panels.append(panel(
        lay, "timeseries", "Joint attainment: exact from requests vs histogram bracket",
        [q(f'min by ({by("source")}) (llm_slo_attainment_ratio{{{sel}, {REQ}, {SLO}, clause="joint", bound="estimate", {WIN}}})',
           WHO + "{{source}} exact", "A", REQUESTS),
         q(f'min by ({by("bound")}) (llm_slo_attainment_ratio{{{sel}, {MET}, {SLO}, clause="joint", bound=~"lower|upper", {WIN}}})',
           WHO + "metrics {{bound}}", "B"),
         objective_query(sel)],
        w=8, unit="percentunit", maxv=1, custom=ts(), overrides=bounds_style() + [limit_style("SLO .* objective")],
        desc=("Per-request attainment from the tap (what clients see) or engine spans; failures count as bad. "
              "Dashed: the bracket /metrics histograms allow. The exact value lies inside it unless the tap "
              "sees what the engine does not (queueing in front of it, rejections).")))
    panels.append(panel(
        lay, "timeseries", "Requests measured by outcome",
        [q(f"sum by ({by('source', 'status')}) (rate(llm_slo_requests_total{{{sel}, {REQ}}}[$__rate_interval]))",
           WHO + "{{source}} {{status}}", "A", REQUESTS)],
        w=8, unit="reqps", custom=ts(),
        desc="ok, http_<code>, stream_error (error event under HTTP 200), client_abort, upstream_reset, truncated."))
    panels.append(panel(
        lay, "timeseries", "Client TTFT minus engine TTFT",
        [q(f'max by ({by("reference")}) (llm_slo_ttft_gap_seconds{{{sel}, stat="mean", {WIN}}})',
           WHO + "mean vs {{reference}}", "A", TTFT_GAP),
         q(f'max by ({by("reference")}) (llm_slo_ttft_gap_seconds{{{sel}, stat="quantile", q="0.99", {WIN}}})',
           WHO + "p99 vs {{reference}}", "B", TTFT_GAP)],
        w=8, unit="s", custom=ts(),
        desc=("Time outside the engine that engine metrics never show: network, proxies, the HTTP server. "
              "Differences of means and of quantiles, not per-request differences.")))


def goodput_panels(lay, panels, sel, joint_title, joint_desc):
    """Joint attainment against the objective, and goodput beside the throughput of the
    same population (the targets and models each SLO judges), per replica."""
    panels.append(panel(
        lay, "timeseries", joint_title,
        [q(f'min by ({by("slo", "bound")}) (llm_slo_attainment_ratio{{{sel}, {MET}, {SLO}, clause="joint", {WIN}}})',
           WHO + "{{slo}} {{bound}}", "A"),
         objective_query(sel)],
        unit="percentunit", maxv=1, custom=ts(), overrides=bounds_style() + [limit_style("SLO .* objective")],
        desc=((joint_desc + " ") if joint_desc else "") + "Red dashed: each SLO's objective from the config."))
    panels.append(panel(
        lay, "timeseries", "Output tokens/s: throughput vs goodput, per SLO population",
        [q(population(sel, "llm_slo_tokens_per_second", "llm_slo_goodput_tokens_per_second", ', direction="output"'),
           WHO + "throughput {{slo}}", "A"),
         q(f"sum by ({by('slo', 'bound')}) (llm_slo_goodput_tokens_per_second{{{sel}, {MET}, {SLO}, {WIN}}})",
           WHO + "goodput {{slo}} {{bound}}", "B")],
        unit="short", custom=ts(), overrides=bounds_style(),
        desc=("Only tokens of requests meeting the SLO count. Throughput is summed over the same targets and models "
              "as the SLO's goodput, so the two lines compare. Near saturation throughput keeps rising while "
              "goodput falls: that gap is the production ceiling. /metrics marginals bound goodput; they do not pin it.")))
    panels.append(panel(
        lay, "timeseries", "Requests/s: all vs good, per SLO population",
        [q(population(sel, "llm_slo_requests_per_second", "llm_slo_goodput_requests_per_second"), WHO + "all {{slo}}", "A"),
         q(f"sum by ({by('slo', 'bound')}) (llm_slo_goodput_requests_per_second{{{sel}, {MET}, {SLO}, {WIN}}})",
           WHO + "good {{slo}} {{bound}}", "B")],
        unit="reqps", custom=ts(), overrides=bounds_style(),
        desc="Finished requests of the targets and models the SLO judges, and those of them that met it."))


def budget_panels(lay, panels, sel, group):
    """Error budget over each SLO's period (slos[].period, 28 days by default); `group` is
    what a line is per besides the replica ("slo" on a target's dashboard, "target, slo"
    across targets)."""
    panels.append(row(lay, "Error budget over the SLO period"))
    remaining = "llm_slo_error_budget_remaining_ratio"
    estimate = preferred_budget(remaining, sel, 'bound="estimate"')
    bounded = preferred_budget(remaining, sel, 'bound=~"lower|estimate|upper"')
    legend = WHO + "".join("{{%s}} " % label.strip() for label in group.split(",")) + "{{bound}}"
    panels.append(panel(
        lay, "stat", "Error budget left over the period (worst target per replica, estimate)",
        [q(f"min by ({by('slo')}) ({estimate})", WHO + "{{slo}}", "A")],
        w=8, h=6, unit="percentunit", steps=[("red", None), ("orange", 0), ("green", 0.25)],
        desc=("1 - (1 - attainment over the period) / (1 - objective); below 0 once overspent. From the tap "
              "where there is one, else engine spans, else the histograms. One value per pod and SLO.")))
    panels.append(panel(
        lay, "timeseries", "Error budget left, with bounds",
        [q(f"min by ({by(group, 'bound')}) ({bounded})", legend, "A")],
        w=10, h=6, unit="percentunit", maxv=1, custom=ts(threshold_style="line"), overrides=bounds_style(),
        steps=[("red", None), ("transparent", 0)]))
    panels.append(panel(
        lay, "stat", "Period covered by data",
        [q(f"min by ({by('slo')}) (llm_slo_error_budget_period_coverage_ratio{{{sel}, {SLO}}})", WHO + "{{slo}}", "A")],
        w=6, h=6, unit="percentunit", steps=[("orange", None), ("green", 1)],
        desc="Below 100 % until the daemon has counted a whole period: its counts start when it does. One value per pod."))

