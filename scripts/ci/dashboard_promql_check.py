#!/usr/bin/env python3
"""Checks every PromQL expression of Grafana dashboards.

Static checks (always): panel ids unique, every query panel has a datasource, gridPos and
targets, and every $variable an expression uses is defined on the dashboard.

--promtool: offline syntax check. Variables become their "All" value (.*) and every
expression (panels and label_values() variables) is handed to `promtool check rules`
as a recording rule, so PromQL parse errors fail without a server.

URL: live check against a real Prometheus. Variables are resolved in dashboard order the
way Grafana does (label_values(m, l) -> group by (l) (m) after substituting the variables
before it). Every expression then runs three times: with every variable at "All" (.*),
with each variable at the first value Prometheus returned for it, and at the last. Each
run must succeed and return data. Queries marked "goodputOptional": "<reason>" may be
empty (reported, not failed) unless --require-optional is given; those also marked
"goodputSomewhere": true (data the live check has, for some selection only, such as one
engine's speculative decoding) must return data in at least one of the three runs. A panel
that repeats per value of a variable ("repeat") runs once per value, as Grafana draws it.

On a dashboard with a $pod variable every aggregation (`sum by (...)`, ...) and every
`on (...)` match must keep the replica identity labels (IDENTITY below), so that two
replicas never merge, unless the query is marked "goodputAcrossReplicas": "<reason>".
scripts/ci/dashboard_replica_check.py checks the same against replicas live.

usage: dashboard_promql_check.py [--promtool] [URL] [--time UNIX] [--require-optional] DASH.json...
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

MACROS = [
    (r"\$__rate_interval\b|\$\{__rate_interval\}", "1m"),
    (r"\$__interval\b|\$\{__interval\}", "15s"),
    (r"\$__range\b|\$\{__range\}", "5m"),
]
VAR_REF = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")
REGEX_SPECIAL = set("\\.+*?()|[]{}^$")
# The labels that tell replicas apart (dashboards/queries.py IDENTITY; docs/config.md#external_labels).
IDENTITY = ("namespace", "pod")
AGGREGATION = re.compile(r"\b(sum|min|max|avg|count|group|stddev|stdvar|topk|bottomk|quantile|count_values)\s*"
                         r"(?:by\s*\(([^)]*)\))?\s*\(")
MATCHING = re.compile(r"\bon\s*\(([^)]*)\)")


class Query:
    def __init__(self, where, expr, optional=None, somewhere=False, repeat=None, across=None):
        self.where, self.expr, self.optional, self.somewhere = where, expr, optional, somewhere
        self.repeat, self.across = repeat, across


def walk_panels(panels, out, problems, ids):
    for p in panels or []:
        pid = p.get("id")
        if pid in ids:
            problems.append(f'panel id {pid} used twice ("{p.get("title")}")')
        ids.add(pid)
        if p.get("type") != "row":
            for key in ("datasource", "gridPos", "targets"):
                if not p.get(key):
                    problems.append(f'panel {pid} "{p.get("title")}" has no {key}')
        for t in p.get("targets") or []:
            if t.get("expr"):
                where = f'panel {pid} "{p.get("title")}" ref {t.get("refId")}'
                out.append(Query(where, t["expr"], t.get("goodputOptional"), bool(t.get("goodputSomewhere")),
                                 p.get("repeat"), t.get("goodputAcrossReplicas")))
        walk_panels(p.get("panels"), out, problems, ids)


def variables(dash):
    return (dash.get("templating") or {}).get("list", [])


def label_values_to_promql(q):
    m = re.fullmatch(r"\s*label_values\((.*),\s*([a-zA-Z_]\w*)\s*\)\s*", q)
    return f"group by ({m.group(2)}) ({m.group(1)})" if m else q


def var_query(v):
    q = v.get("query")
    q = q.get("query", "") if isinstance(q, dict) else (q or "")
    return label_values_to_promql(q)


def substitute(expr, values):
    for pat, rep in MACROS:
        expr = re.sub(pat, rep, expr)

    def rep(m):
        name = m.group(1) or m.group(2)
        return values.get(name, m.group(0))

    return VAR_REF.sub(rep, expr)


def escape_regex(value):
    # Grafana regex-escapes values of multi-value variables; inside a PromQL string
    # literal each regex backslash is written twice.
    return "".join("\\\\" + c if c in REGEX_SPECIAL else c for c in value)


def identity_problems(qu):
    """Where an aggregation or a vector match drops a replica identity label."""
    out = []
    for m in AGGREGATION.finditer(qu.expr):
        labels = {label.strip() for label in (m.group(2) or "").split(",")}
        if m.group(2) is None or not set(IDENTITY) <= labels:
            out.append(f"{qu.where}: {m.group(0).strip()}...) merges replicas: group by {', '.join(IDENTITY)} "
                       f"too, or mark the query goodputAcrossReplicas with the reason")
    for m in MATCHING.finditer(qu.expr):
        labels = {label.strip() for label in m.group(1).split(",")}
        if not set(IDENTITY) <= labels:
            out.append(f"{qu.where}: on ({m.group(1)}) matches across replicas: add {', '.join(IDENTITY)}")
    return out


def static_problems(dash, queries):
    problems = []
    names = {v.get("name") for v in variables(dash)}
    if "pod" in names:
        for qu in queries:
            if not qu.across:
                problems += identity_problems(qu)
    for qu in queries:
        for m in VAR_REF.finditer(qu.expr):
            name = m.group(1) or m.group(2)
            # $1 is label_replace's capture group, not a variable; Grafana leaves it alone.
            if not name.startswith("__") and not name.isdigit() and name not in names:
                problems.append(f"{qu.where}: undefined variable ${name}")
    return problems


def prom_query(base, expr, at):
    params = {"query": expr}
    if at:
        params["time"] = at
    url = base + "/api/v1/query?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            res = json.load(r)
    except urllib.error.HTTPError as h:
        try:
            return None, json.load(h).get("error", str(h))
        except ValueError:
            return None, str(h)
    except (urllib.error.URLError, OSError) as e:
        return None, f"cannot reach Prometheus: {e}"
    if res.get("status") != "success":
        return None, res.get("error", "query failed")
    return res["data"]["result"], None


def resolve_variables(dash, base, at, pick=0, every=None):
    """Returns ({name: all_value}, {name: concrete_value}, problems); the concrete value is
    the value at index `pick` (0: first, -1: last) of those Prometheus returned. `every`,
    a dict, receives each query variable's values as they would be substituted."""
    all_vals, first_vals, problems = {}, {}, []
    for v in variables(dash):
        name, kind = v.get("name"), v.get("type")
        if kind == "datasource":
            continue
        if kind in ("custom", "constant", "interval", "textbox"):
            cur = (v.get("current") or {}).get("value")
            if cur is None:
                opts = v.get("options") or [{"value": (v.get("query") or "").split(",")[0]}]
                cur = opts[0]["value"]
            all_vals[name] = first_vals[name] = cur
            continue
        if kind != "query":
            problems.append(f"variable ${name}: unsupported type {kind}")
            continue
        if base is None:
            all_vals[name] = first_vals[name] = ".*"
            continue
        expr = substitute(var_query(v), first_vals)
        result, err = prom_query(base, expr, at)
        label = re.search(r"group by \((\w+)\)", expr)
        if err or not result or not label:
            problems.append(f"variable ${name}: {err or 'no values'}\n     {expr}")
            all_vals[name] = first_vals[name] = ".*"
            continue
        values = sorted({r["metric"].get(label.group(1), "") for r in result} - {""})
        if not values:
            problems.append(f"variable ${name}: no values\n     {expr}")
            values = [".*"]
        multi = v.get("multi") or v.get("includeAll")
        if every is not None:
            every[name] = [escape_regex(x) if multi else x for x in values]
        first_vals[name] = escape_regex(values[pick]) if multi else values[pick]
        all_vals[name] = v.get("allValue", ".*") if v.get("includeAll") else first_vals[name]
        print(f"     ${name} = {values[:5]}{' ...' if len(values) > 5 else ''}{' (last)' if pick else ''}")
    return all_vals, first_vals, problems


def expansions(queries, vals, every):
    """(query, expression) pairs as Grafana runs them: a panel repeated per value of a
    variable runs once per value of `every`, the rest once with `vals`."""
    for qu in queries:
        values = every.get(qu.repeat) if qu.repeat else None
        for value in values or [None]:
            yield qu, substitute(qu.expr, vals if value is None else dict(vals, **{qu.repeat: value}))


def promtool_syntax(path, queries, all_vals):
    rules = []
    for i, qu in enumerate(queries):
        expr = substitute(qu.expr, all_vals)
        rules.append({"record": f"dashboard_check:expr_{i}", "expr": expr})
    with tempfile.NamedTemporaryFile("w", suffix=".rules.json", delete=False) as f:
        # JSON is valid YAML, and needs no YAML library here.
        json.dump({"groups": [{"name": path, "rules": rules}]}, f)
    res = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
    if res.returncode != 0:
        return [f"promtool check rules rejected an expression:\n{res.stdout}{res.stderr}"]
    return []


def check(path, args):
    with open(path, encoding="utf-8") as f:
        dash = json.load(f)
    print(f"== {path}")
    queries, problems = [], []
    walk_panels(dash.get("panels"), queries, problems, set())
    if not queries:
        problems.append("no PromQL expressions found")
    problems += static_problems(dash, queries)
    every = {}
    all_vals, first_vals, var_problems = resolve_variables(dash, args.url, args.time, every=every)
    problems += var_problems
    var_queries = [Query(f'variable ${v["name"]}', var_query(v))
                   for v in variables(dash) if v.get("type") == "query"]
    if args.promtool:
        problems += promtool_syntax(path, queries + var_queries, all_vals)
    passed = optional_empty = 0
    if args.url:
        modes = [("all", all_vals), ("first", first_vals)]
        if any(v.get("type") == "query" for v in variables(dash)):
            # Each variable at its last value too: a second target, model and SLO.
            _, last_vals, last_problems = resolve_variables(dash, args.url, args.time, pick=-1)
            problems += last_problems
            modes.append(("last", last_vals))
        somewhere = {}
        for mode, vals in modes:
            for qu, expr in expansions(queries, vals, every if mode == "all" else {}):
                result, err = prom_query(args.url, expr, args.time)
                if err:
                    problems.append(f"{qu.where} [{mode}]: {err}\n     {expr}")
                elif not result:
                    if qu.optional and not args.require_optional:
                        optional_empty += 1
                        print(f"     optional, empty [{mode}]: {qu.where} ({qu.optional})")
                    else:
                        problems.append(f"{qu.where} [{mode}]: no data returned\n     {expr}")
                else:
                    passed += 1
                    somewhere[qu.where] = True
        for qu in queries:
            if qu.somewhere and not somewhere.get(qu.where):
                problems.append(f"{qu.where}: no data for any selection ({', '.join(m for m, _ in modes)}); "
                                f"it must have data for one ({qu.optional})")
    for p in problems:
        print(f"FAIL {p}")
    print(f"   {len(queries)} expressions; {passed} returned data, {optional_empty} optional and empty, "
          f"{len(problems)} problems")
    return not problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--promtool", action="store_true", help="offline PromQL syntax check via promtool")
    ap.add_argument("--time", help="evaluation time (unix seconds); default: now")
    ap.add_argument("--require-optional", action="store_true", help="optional queries must return data too")
    ap.add_argument("items", nargs="+", metavar="URL|DASH.json")
    args = ap.parse_args()
    urls = [i for i in args.items if re.match(r"https?://", i)]
    if len(urls) > 1:
        ap.error("give at most one Prometheus URL")
    args.url = urls[0].rstrip("/") if urls else None
    paths = [i for i in args.items if i not in urls]
    ok = all([check(p, args) for p in paths])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
