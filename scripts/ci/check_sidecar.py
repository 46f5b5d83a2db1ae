#!/usr/bin/env python3
"""Check a rendering of the sidecar components (deploy/kubernetes/components/sidecar and
sidecar-tap) on a team's own engine Deployment (docs/kubernetes.md). The engine must come
out as it went in, and goodput must never be able to harm it:
- the Deployment's spec outside the pod template (replicas, strategy, selector), the pod
  template's annotations and the engine's containers and volumes are unchanged, and the
  engine's containers stay first, in their order: `kubectl logs deploy/NAME` shows the
  engine (or the default-container annotation names an engine container);
- the `goodput` container comes after them, with the Downward API identity variables, its
  metrics port, a memory request and limit, no readiness and no liveness probe, read-only
  and non-root; GOODPUT_ON_INVALID_CONFIG=wait, so that a config that does not validate at
  start leaves it waiting rather than restarting (the pod would not be Ready), except with
  --tap, where the Service's traffic goes through goodput and it must exit instead; its config volume names ConfigMap goodput-sidecar-config exactly (no hash
  suffix, so a config edit leaves the pod template alone), and that ConfigMap is rendered;
- goodput's config scrapes an engine port on loopback, labels with the pod identity, and
  keeps state_dir on an emptyDir;
- with --tap: the config's `targets[].tap.listen` is the container's goodput-tap port and
  its upstream an engine port, and the Service's first port targets goodput-tap; without
  --tap the config has no tap and the Service is untouched;
- the PodMonitor selects the pod template and scrapes a port goodput has.
usage: check_sidecar.py RENDERED.yaml --source SOURCE.yaml --deployment NAME [--service NAME] [--tap]"""
import argparse
import sys
from urllib.parse import urlsplit

import yaml

CONFIGMAP = "goodput-sidecar-config"
DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"


def load(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def find(docs, kind, name=None):
    found = [d for d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    if len(found) != 1:
        raise SystemExit(f"want one {kind} {name or ''}, found {len(found)}")
    return found[0]


def without(d, *keys):
    return {k: v for k, v in d.items() if k not in keys}


def check_engine(dep, dep0, errors):
    """The engine's part of the Deployment comes out as it went in, engine first."""
    pod, pod0 = dep["spec"]["template"]["spec"], dep0["spec"]["template"]["spec"]
    check(without(dep["spec"], "template") == without(dep0["spec"], "template"),
          "the Deployment's spec outside the pod template (replicas, strategy, selector) changed", errors)
    meta, meta0 = dep["spec"]["template"]["metadata"], dep0["spec"]["template"]["metadata"]
    check(meta.get("annotations") == meta0.get("annotations"), "the pod template's annotations changed", errors)
    engine = pod0["containers"]
    check(pod["containers"][: len(engine)] == engine,
          "the engine's containers changed or no longer come first, in their order", errors)
    default = (meta.get("annotations") or {}).get(DEFAULT_CONTAINER) or pod["containers"][0]["name"]
    check(default in {c["name"] for c in engine},
          f"`kubectl logs` would show container {default}, not the engine's", errors)
    vols = {v["name"]: v for v in pod.get("volumes") or []}
    for v0 in pod0.get("volumes") or []:
        check(vols.get(v0["name"]) == v0, f"engine volume {v0['name']} changed", errors)
    check(without(pod, "containers", "volumes") == without(pod0, "containers", "volumes"),
          "the pod spec outside containers and volumes changed", errors)
    return vols


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
    vols = check_engine(dep, dep0, errors)
    names = [c["name"] for c in pod["containers"]]
    if "goodput" not in names:
        print(f"{a.rendered}: no goodput container in Deployment {a.deployment}", file=sys.stderr)
        return 1
    check(names.index("goodput") >= len(pod0["containers"]), "goodput comes before the engine's containers", errors)
    g = pod["containers"][names.index("goodput")]

    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in g.get("env") or []}
    for var, field in [("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace"), ("NODE_NAME", "spec.nodeName")]:
        check(env.get(var) == field, f"goodput env {var} is not the Downward API's {field}", errors)
    on_invalid = {e["name"]: e.get("value") for e in g.get("env") or []}.get("GOODPUT_ON_INVALID_CONFIG")
    if a.tap:
        check(on_invalid in (None, "exit"), f"goodput has GOODPUT_ON_INVALID_CONFIG={on_invalid} with the tap: a goodput "
              "waiting for a valid config keeps the pod Ready with nothing listening on the tap's port", errors)
    else:
        check(on_invalid == "wait", f"goodput has GOODPUT_ON_INVALID_CONFIG={on_invalid}, not wait: a config that does not "
              "validate at start would restart goodput, and the pod is not Ready until it runs", errors)
    ports = {p["name"]: p["containerPort"] for p in g.get("ports") or []}
    check(ports.get("goodput-metrics") == 9464, "goodput has no port goodput-metrics: 9464", errors)
    all_ports = [p["name"] for c in pod["containers"] for p in c.get("ports") or []]
    check(len(all_ports) == len(set(all_ports)), f"duplicate port names in the pod: {all_ports}", errors)
    # A failing probe on goodput would take the engine's pod out of its Service (readiness)
    # or restart goodput, which does the same for as long as it is down (liveness).
    check("readinessProbe" not in g, "goodput has a readinessProbe: it would gate the engine's readiness", errors)
    check("livenessProbe" not in g, "goodput has a livenessProbe: its restarts would take the pod out of its Service", errors)
    res = g.get("resources") or {}
    check((res.get("limits") or {}).get("memory") and (res.get("requests") or {}).get("memory"),
          "goodput has no memory request and limit: the engine could be the one killed", errors)
    sc = g.get("securityContext") or {}
    check(sc.get("readOnlyRootFilesystem") and sc.get("runAsNonRoot"), "goodput runs writable or as root", errors)

    mounts = {m["name"]: m["mountPath"] for m in g.get("volumeMounts") or []}
    check(mounts.get("goodput-config") == "/etc/goodput", "config not mounted at /etc/goodput", errors)
    check(mounts.get("goodput-tmp") == "/tmp", "no /tmp emptyDir mounted", errors)
    cm_name = (vols.get("goodput-config") or {}).get("configMap", {}).get("name")
    check(cm_name == CONFIGMAP, f"volume goodput-config names ConfigMap {cm_name}, not {CONFIGMAP}: a hash suffix "
          "would roll the engine's pods on every config edit (generate it with options: {disableNameSuffixHash: true})", errors)
    cms = [d for d in out if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == cm_name]
    check(len(cms) == 1, f"ConfigMap {cm_name} is not rendered: generate it in your overlay (docs/kubernetes.md)", errors)
    config = yaml.safe_load(cms[0]["data"]["config.yaml"]) if cms else {}
    labels = config.get("external_labels") or {}
    check(labels.get("pod") == "${POD_NAME}", "config's external_labels.pod is not ${POD_NAME}", errors)
    state_dir = config.get("state_dir")
    if state_dir:
        state_vol = next((n for n, p in mounts.items() if p == state_dir), None)
        check(state_vol is not None and "emptyDir" in (vols.get(state_vol) or {}),
              f"state_dir {state_dir} is not an emptyDir mounted in the goodput container", errors)
    engine_ports = [p["containerPort"] for c in pod0["containers"] for p in c.get("ports") or []]
    for t in config.get("targets") or []:
        u = urlsplit(t.get("url", ""))
        if u.hostname in ("127.0.0.1", "localhost", "::1"):
            check(u.port in engine_ports, f"target {t.get('name')} scrapes port {u.port}, not an engine port {engine_ports}", errors)

    svc = find(out, "Service", a.service) if a.service else None
    svc0 = find(src, "Service", a.service) if a.service else None
    tap = [t.get("tap") for t in config.get("targets") or [] if t.get("tap")]
    if a.tap:
        check(ports.get("goodput-tap") == 8001, "goodput has no port goodput-tap: 8001", errors)
        check(len(tap) == 1, "the config has no targets[].tap: the Service would send its traffic to a port "
              "nothing listens on", errors)
        if tap:
            listen_port = int(tap[0]["listen"].rsplit(":", 1)[1])
            upstream_port = urlsplit(tap[0]["upstream"]).port
            check(listen_port == ports.get("goodput-tap"), f"tap listens on {listen_port}, the port says {ports.get('goodput-tap')}", errors)
            check(upstream_port in engine_ports, f"tap upstream port {upstream_port} is not an engine port {engine_ports}", errors)
        if svc:
            check(svc["spec"]["ports"][0]["targetPort"] == "goodput-tap", "the Service's first port does not target goodput-tap", errors)
            check(svc["spec"]["ports"][0]["port"] == svc0["spec"]["ports"][0]["port"], "the Service's port number changed", errors)
            check(svc["spec"]["ports"][1:] == svc0["spec"]["ports"][1:], "the Service's other ports changed", errors)
    else:
        check(not tap, "the config has a tap, but the Service does not send traffic to it (add components/sidecar-tap)", errors)
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
