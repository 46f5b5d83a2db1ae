"""Query building blocks of the per-target dashboards (overview.json, target.json): the
label selections, the replica identity every aggregation keeps, and the Grafana target
with the markers dashboard_promql_check.py reads.
"""
from grafana import DS

# Where a series comes from: the external_labels of a goodput instance (docs/config.md#external_labels;
# the Kubernetes sidecar sets pod, namespace and node from the Downward API, the docs'
# example adds cluster) and Prometheus's scrape address, the one identity a daemon without
# external labels has. Every aggregation keeps them, so two sidecars that both call their
# engine `vllm` stay two lines, two stats and two "up"s. A label a series lacks groups as
# empty, so listing one that is never set costs nothing.
IDENTITY = ("cluster", "namespace", "node", "pod", "instance")
# What a legend shows of the identity.
WHO = "{{pod}} "
REPLICA = 'namespace=~"$namespace", pod=~"$pod"'
TSEL = f'{REPLICA}, target=~"$target"'
SEL = f'{TSEL}, model=~"$model"'
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
E2E_LIMIT = "e2e limit: only for SLOs with an e2e clause (the live check's batch SLO has one, chat has not)"
TTFT_GAP = "requests: needs a tap, whose clients see a TTFT of their own"
# Optional data the live check has for one of its engines or SLOs: it requires it for some
# selection of the variables ("goodputSomewhere").
SOMEWHERE = {SPEC, E2E_LIMIT}
# Queries that deliberately span replicas ("goodputAcrossReplicas"): every other query
# returns one series per replica (and per the labels it groups by).
LIMIT = "a limit from the config: the same line for every replica of the deployment"
COUNT = "a count over every selected replica"
TARGET_DASH = "goodput-target"
OVERVIEW_DASH = "goodput-overview"


def by(*labels):
    """A `by` list that keeps the replica identity."""
    return ", ".join(IDENTITY + labels)


def q(expr, legend, ref, optional=None, instant=False, fmt=None, across=None):
    t = {"refId": ref, "datasource": DS, "expr": expr, "legendFormat": legend}
    if instant:
        t["instant"], t["range"] = True, False
    if fmt:
        t["format"] = fmt
    if optional:
        t["goodputOptional"] = optional
        if optional in SOMEWHERE:
            t["goodputSomewhere"] = True
    if across:
        t["goodputAcrossReplicas"] = across
    return t


def slo_scope(sel):
    """Keeps an SLO's limits to the SLOs that judge the targets and models shown: the
    limits carry no target (docs/metrics.md#slo-and-kv-band-limits), the SLO's
    llm_slo_evaluable series do."""
    return f"and on (slo) group by (slo) (llm_slo_evaluable{{{sel}, {MET}, {SLO}, {WIN}}})"


def threshold_query(sel, clause):
    # Every SLO needs a clause, but not every clause: only e2e is missing from an SLO here.
    return q(f'max by (slo) (llm_slo_threshold_seconds{{{REPLICA}, {SLO}, clause="{clause}"}}) {slo_scope(sel)}',
             "SLO {{slo}} %s limit" % clause, "X", E2E_LIMIT if clause == "e2e" else None, across=LIMIT)


def objective_query(sel):
    return q(f"max by (slo) (llm_slo_objective_ratio{{{REPLICA}, {SLO}}}) {slo_scope(sel)}",
             "SLO {{slo}} objective", "X", across=LIMIT)


def population(sel, family, goodput_family, extra=""):
    """`family` summed over the targets and models each SLO judges, per replica: the
    population its goodput is computed over, taken from the goodput series' own target and
    model labels."""
    keys = by("target", "model")
    return (f"sum by ({by('slo')}) (sum by ({keys}) ({family}{{{sel}{extra}, {WIN}}})"
            f" * on ({keys}) group_right"
            f' group by ({keys}, slo) ({goodput_family}{{{sel}, {MET}, {SLO}, bound="estimate", {WIN}}}))')


def preferred_budget(family, sel, bound):
    """The budget family from the tap, else the OTLP spans, else the histograms (docs/metrics.md)."""
    parts = [f'{family}{{{sel}, {SLO}, source="{src}", {bound}}}' for src in ("tap", "otlp", "metrics")]
    return " or ignoring(source) ".join(parts)
