#!/usr/bin/env python3
"""Checks that the per-target dashboards keep sidecar replicas apart, against a real
Prometheus scraping several goodput replicas that watch targets of the same name
(scripts/ci/dashboards-live.sh starts them).

Every query runs as Grafana runs it (variables substituted as in dashboard_promql_check.py:
"All" is .*, a repeated panel runs once per value of its variable). With --pods A,B:
  * $pod's label_values are exactly the pods, and each --var NAME=V1,V2 variable's are
    exactly those values (e.g. window, namespace);
  * with every variable at "All", each query not marked goodputAcrossReplicas returns
    series for exactly those pods, every series with its own pod label (a series without
    one is replicas merged). An optional query may cover fewer pods; a repeated panel's
    copy for one pod returns that pod only;
  * with $pod at one pod, each such query returns that pod only, and data unless optional.
With --down POD, once POD's engine is stopped: every per-replica query of llm_slo_target_up
returns 0 for POD and 1 for every other pod, and a count of targets up (== 1) or down (== 0)
counts them so. --wait SECONDS retries until that holds (the scrapes need a moment).

usage: dashboard_replica_check.py URL --pods A,B [--down POD [--wait S]] [--var NAME=V1,V2]... DASH.json...
"""
import argparse
import json
import re
import sys
import time

from dashboard_promql_check import (escape_regex, prom_query, resolve_variables, substitute, var_query,
                                    variables, walk_panels)

UP = "llm_slo_target_up"
UP_COUNT = re.compile(UP + r"\{[^}]*\}\s*==\s*([01])")


def load(path):
    with open(path, encoding="utf-8") as f:
        dash = json.load(f)
    queries, problems = [], []
    walk_panels(dash.get("panels"), queries, problems, set())
    return dash, queries, problems


def label_values(dash, url, vals):
    """{variable: its values} with the variables before it at `vals`, as Grafana lists them."""
    out = {}
    for v in variables(dash):
        if v.get("type") != "query":
            continue
        expr = substitute(var_query(v), vals)
        label = re.search(r"group by \((\w+)\)", expr)
        result, err = prom_query(url, expr, None)
        out[v["name"]] = None if err or not label else {r["metric"].get(label.group(1), "") for r in result} - {""}
    return out


def runs(queries, vals, pods):
    """(query, pods the run selects, expression): a panel repeated per pod runs once per pod."""
    for qu in queries:
        if qu.repeat == "pod":
            for p in pods:
                yield qu, {p}, substitute(qu.expr, dict(vals, pod=escape_regex(p)))
        else:
            yield qu, None, substitute(qu.expr, vals)


def pods_problems(where, expr, result, want, optional):
    if not result:
        return [] if optional else [f"{where}: no data\n     {expr}"]
    got = [r["metric"].get("pod", "") for r in result]
    if "" in got:
        merged = next(r["metric"] for r in result if not r["metric"].get("pod"))
        return [f"{where}: a series without a pod label, replicas merged: {merged}\n     {expr}"]
    if set(got) - want or (not optional and set(got) != want):
        return [f"{where}: series for pods {sorted(set(got))}, want {sorted(want)}\n     {expr}"]
    return []


def separate(dash, queries, url, all_vals, pods):
    """Each per-replica query returns one series set per pod, at "All" and per pod."""
    problems, checked = [], 0
    for sel_pods, vals in [(set(pods), all_vals)] + [({p}, dict(all_vals, pod=escape_regex(p))) for p in pods]:
        for qu, repeat_pods, expr in runs(queries, vals, sorted(sel_pods)):
            if qu.across:
                continue
            result, err = prom_query(url, expr, None)
            where = f"{qu.where} [pod={'|'.join(sorted(repeat_pods or sel_pods))}]"
            if err:
                problems.append(f"{where}: {err}\n     {expr}")
                continue
            problems += pods_problems(where, expr, result, repeat_pods or sel_pods, bool(qu.optional))
            checked += 1
    return problems, checked


def up_problems(queries, url, all_vals, pods, down):
    problems = []
    for sel_pods, vals in [(pods, all_vals), ([down], dict(all_vals, pod=escape_regex(down)))]:
        for qu, _, expr in runs([qu for qu in queries if UP in qu.expr], vals, sel_pods):
            result, err = prom_query(url, expr, None)
            if err or not result:
                problems.append(f"{qu.where}: {err or 'no data'}\n     {expr}")
                continue
            if qu.across:
                m = UP_COUNT.search(qu.expr)
                if not m:
                    problems.append(f"{qu.where}: spans replicas but counts neither up (== 1) nor down (== 0)")
                    continue
                n_down = sum(1 for p in sel_pods if p == down)
                want = n_down if m.group(1) == "0" else len(sel_pods) - n_down
                got = float(result[0]["value"][1])
                if len(result) != 1 or got != want:
                    problems.append(f"{qu.where} [pods {'|'.join(sel_pods)}]: {got:g}, want {want}\n     {expr}")
                continue
            seen = {}
            for r in result:
                seen[r["metric"].get("pod", "")] = float(r["value"][1])
            want = {p: 0.0 if p == down else 1.0 for p in sel_pods}
            if seen != want:
                problems.append(f"{qu.where} [pods {'|'.join(sel_pods)}]: up {seen}, want {want}\n     {expr}")
    return problems


def check(path, args):
    dash, queries, problems = load(path)
    print(f"== {path}")
    all_vals, _, var_problems = resolve_variables(dash, args.url, None)
    problems += var_problems
    if args.down:
        deadline = time.monotonic() + args.wait
        while True:
            down_problems = up_problems(queries, args.url, all_vals, args.pods, args.down)
            if not down_problems or time.monotonic() >= deadline:
                break
            time.sleep(1)
        problems += down_problems
        print(f"   {sum(UP in qu.expr for qu in queries)} queries of {UP}: {args.down} down, "
              f"{', '.join(p for p in args.pods if p != args.down)} up")
    else:
        listed = label_values(dash, args.url, all_vals)
        for name, want in [("pod", set(args.pods))] + [(n, set(v)) for n, v in args.var]:
            if name not in listed:
                problems.append(f"variable ${name}: not a query of the data (label_values)")
            elif listed[name] != want:
                problems.append(f"variable ${name}: label_values gives {sorted(listed[name] or [])}, want {sorted(want)}")
        sep_problems, checked = separate(dash, queries, args.url, all_vals, args.pods)
        problems += sep_problems
        print(f"   variables {', '.join(f'${n}={sorted(v or [])}' for n, v in listed.items())}")
        print(f"   {checked} per-replica runs; {sum(1 for qu in queries if qu.across)} queries span replicas")
    for p in problems:
        print(f"FAIL {p}")
    return not problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url", metavar="URL")
    ap.add_argument("--pods", required=True, type=lambda s: s.split(","), help="the replicas' pod labels")
    ap.add_argument("--down", help="the pod whose engine is stopped")
    ap.add_argument("--wait", type=float, default=0, help="seconds to retry the --down check")
    ap.add_argument("--var", action="append", default=[], type=lambda s: (s.split("=")[0], s.split("=")[1].split(",")),
                    help="NAME=V1,V2: the values the variable's label_values must give")
    ap.add_argument("dashboards", nargs="+", metavar="DASH.json")
    args = ap.parse_args()
    args.url = args.url.rstrip("/")
    if args.down and args.down not in args.pods:
        ap.error(f"--down {args.down} is not one of --pods")
    ok = all([check(p, args) for p in args.dashboards])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
