#!/usr/bin/env python3
"""Check that rendered manifests choose exactly one alert path (docs/alerts.md):
- daemon: no PrometheusRule with alert rules, and every goodput container delivers its own;
- prometheus: a PrometheusRule with alert rules, and every goodput container runs with
  delivery off (GOODPUT_NO_ALERT_DELIVERY=true or --no-alert-delivery).
Anything else pages twice or not at all. Prints the path; exits 1 on a mix, or when it
differs from --expect.
usage: check_alert_path.py RENDERED.yaml [--expect daemon|prometheus]"""
import sys

import yaml

WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet"}


def delivery_off(container: dict) -> bool:
    env = {e.get("name"): e.get("value") for e in container.get("env") or []}
    args = container.get("args") or []
    return env.get("GOODPUT_NO_ALERT_DELIVERY") == "true" or "--no-alert-delivery" in args


def main() -> int:
    path, expect = sys.argv[1], None
    if sys.argv[2:4] and sys.argv[2] == "--expect":
        expect = sys.argv[3]
    alert_rules = 0
    containers = []  # (workload, delivery off)
    with open(path, encoding="utf-8") as f:
        for doc in yaml.safe_load_all(f):
            if not doc:
                continue
            kind, name = doc.get("kind"), doc.get("metadata", {}).get("name")
            if kind == "PrometheusRule":
                for g in doc.get("spec", {}).get("groups") or []:
                    alert_rules += sum(1 for r in g.get("rules") or [] if "alert" in r)
            if kind in WORKLOADS:
                for c in doc["spec"]["template"]["spec"].get("containers") or []:
                    if c.get("name") == "goodput":
                        containers.append((f"{kind}/{name}", delivery_off(c)))
    if not containers:
        print(f"{path}: no goodput container", file=sys.stderr)
        return 1
    chosen = "prometheus" if alert_rules else "daemon"
    wrong = [w for w, off in containers if off != (chosen == "prometheus")]
    if wrong:
        if chosen == "prometheus":
            why = f"a PrometheusRule raises {alert_rules} alerts, but these goodput containers deliver their own too (pages twice)"
        else:
            why = "no PrometheusRule raises alerts, but these goodput containers have delivery off (nothing pages)"
        print(f"{path}: {why}: {', '.join(wrong)}", file=sys.stderr)
        return 1
    if expect and expect != chosen:
        print(f"{path}: alert path is {chosen}, expected {expect}", file=sys.stderr)
        return 1
    print(f"alert path: {chosen} ({len(containers)} goodput container(s), {alert_rules} Prometheus alert rules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
