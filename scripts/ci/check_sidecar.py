#!/usr/bin/env python3
"""Check a rendering of the sidecar components (deploy/kubernetes/components/sidecar and
sidecar-tap) on a team's own engine Deployment (docs/kubernetes.md):
- the engine's containers, and its volumes, come out exactly as they went in;
- the Deployment gains a `goodput` container with the Downward API identity variables, its
  metrics port, the config volume pointing at the rendered (hashed) ConfigMap, and /tmp;
- with --tap: the container gains port goodput-tap, the config's `targets[].tap.listen`
  is that port and its upstream is the engine's container port, and the Service's first
  port targets goodput-tap; without --tap the Service is untouched;
- the PodMonitor selects the pod template and scrapes a port the pod has.
usage: check_sidecar.py RENDERED.yaml --source SOURCE.yaml --deployment NAME [--service NAME] [--tap]"""
import argparse
import sys

import yaml


def load(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def find(docs, kind, name=None):
    found = [d for d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    if len(found) != 1:
        raise SystemExit(f"want one {kind} {name or ''}, found {len(found)}")
    return found[0]


def check(cond, what, errors):
    if not cond:
        errors.append(what)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("rendered")
    ap.add_argument("--source", required=True)
    ap.add_argument("--deployment", required=True)
    ap.add_argument("--service")
    ap.add_argument("--tap", action="store_true")
    a = ap.parse_args()
    out, src = load(a.rendered), load(a.source)
    errors = []

    dep, dep0 = find(out, "Deployment", a.deployment), find(src, "Deployment", a.deployment)
    pod, pod0 = dep["spec"]["template"]["spec"], dep0["spec"]["template"]["spec"]
    by_name = {c["name"]: c for c in pod["containers"]}
    for c0 in pod0["containers"]:
        check(by_name.get(c0["name"]) == c0, f"engine container {c0['name']} changed", errors)
    vols = {v["name"]: v for v in pod.get("volumes") or []}
    for v0 in pod0.get("volumes") or []:
        check(vols.get(v0["name"]) == v0, f"engine volume {v0['name']} changed", errors)
    check(dep["spec"]["selector"] == dep0["spec"]["selector"], "the Deployment's selector changed", errors)

    g = by_name.get("goodput")
    if g is None:
        print(f"{a.rendered}: no goodput container in Deployment {a.deployment}", file=sys.stderr)
        return 1
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in g.get("env") or []}
    for var, field in [("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace"), ("NODE_NAME", "spec.nodeName")]:
        check(env.get(var) == field, f"goodput env {var} is not the Downward API's {field}", errors)
    ports = {p["name"]: p["containerPort"] for p in g.get("ports") or []}
    check(ports.get("goodput-metrics") == 9464, "goodput has no port goodput-metrics: 9464", errors)
    all_ports = [p["name"] for c in pod["containers"] for p in c.get("ports") or []]
    check(len(all_ports) == len(set(all_ports)), f"duplicate port names in the pod: {all_ports}", errors)
    mounts = {m["name"]: m["mountPath"] for m in g.get("volumeMounts") or []}
    check(mounts.get("goodput-config") == "/etc/goodput", "config not mounted at /etc/goodput", errors)
    check(mounts.get("goodput-tmp") == "/tmp", "no /tmp emptyDir mounted", errors)
    cm_name = (vols.get("goodput-config") or {}).get("configMap", {}).get("name")
    cms = [d for d in out if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == cm_name]
    check(len(cms) == 1, f"volume goodput-config names ConfigMap {cm_name}, which is not rendered", errors)
    config = yaml.safe_load(cms[0]["data"]["config.yaml"]) if cms else {}
    labels = config.get("external_labels") or {}
    state_dir = config.get("state_dir")
    if state_dir:
        state_vol = next((n for n, p in mounts.items() if p == state_dir), None)
        check(state_vol is not None and "emptyDir" in (vols.get(state_vol) or {}),
              f"state_dir {state_dir} is not an emptyDir mounted in the goodput container", errors)
    check(labels.get("pod") == "${POD_NAME}", "config's external_labels.pod is not ${POD_NAME}", errors)
    sc = g.get("securityContext") or {}
    check(sc.get("readOnlyRootFilesystem") and sc.get("runAsNonRoot"), "goodput runs writable or as root", errors)

    svc = find(out, "Service", a.service) if a.service else None
    svc0 = find(src, "Service", a.service) if a.service else None
    tap = [t.get("tap") for t in config.get("targets") or [] if t.get("tap")]
    if a.tap:
        check(ports.get("goodput-tap") == 8001, "goodput has no port goodput-tap: 8001", errors)
        check(len(tap) == 1, "the config has no targets[].tap", errors)
        if tap:
            listen_port = int(tap[0]["listen"].rsplit(":", 1)[1])
            upstream_port = int(tap[0]["upstream"].rstrip("/").rsplit(":", 1)[1])
            check(listen_port == ports.get("goodput-tap"), f"tap listens on {listen_port}, the port says {ports.get('goodput-tap')}", errors)
            engine_ports = [p["containerPort"] for c in pod0["containers"] for p in c.get("ports") or []]
            check(upstream_port in engine_ports, f"tap upstream port {upstream_port} is not an engine port {engine_ports}", errors)
        if svc:
            check(svc["spec"]["ports"][0]["targetPort"] == "goodput-tap", "the Service's first port does not target goodput-tap", errors)
            check(svc["spec"]["ports"][0]["port"] == svc0["spec"]["ports"][0]["port"], "the Service's port number changed", errors)
            check(svc["spec"]["ports"][1:] == svc0["spec"]["ports"][1:], "the Service's other ports changed", errors)
    else:
        check("goodput-tap" not in ports and not tap, "a tap without --tap", errors)
        if svc:
            check(svc["spec"] == svc0["spec"], "the Service changed without the tap", errors)

    pm = find(out, "PodMonitor")
    want = pm["spec"]["selector"]["matchLabels"]
    tmpl_labels = dep["spec"]["template"]["metadata"].get("labels") or {}
    check(all(tmpl_labels.get(k) == v for k, v in want.items()), f"PodMonitor selector {want} misses the pod labels {tmpl_labels}", errors)
    for ep in pm["spec"]["podMetricsEndpoints"]:
        check(ep["port"] in ports, f"PodMonitor scrapes port {ep['port']}, which goodput does not have", errors)

    for e in errors:
        print(f"{a.rendered}: {e}", file=sys.stderr)
    if not errors:
        print(f"{a.rendered}: sidecar on Deployment/{a.deployment} ok{' (tap)' if a.tap else ''}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
