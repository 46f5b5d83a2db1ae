#!/usr/bin/env python3
"""Two renderings of the same manifests with two different goodput configs: the config
ConfigMap differs, and every other document (the engine's Deployment above all) is
byte-identical, so that editing goodput's config never rolls the engine's pods.
Documents are compared as the renderer wrote them, text for text.
usage: check_same_pods.py A.yaml B.yaml --configmap NAME"""
import argparse
import re
import sys

import yaml


def documents(path):
    """(kind/name, text) of each document, in the file's order."""
    with open(path, encoding="utf-8") as f:
        texts = [t for t in re.split(r"^---[ \t]*$", f.read(), flags=re.M) if t.strip()]
    out = []
    for t in texts:
        d = yaml.safe_load(t)
        if d:
            out.append((f"{d.get('kind')}/{d['metadata']['name']}", t.strip("\n")))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--configmap", required=True)
    a = ap.parse_args()
    da, db = documents(a.a), documents(a.b)
    errors = []
    if [k for k, _ in da] != [k for k, _ in db]:
        errors.append(f"the two renderings hold different objects: {[k for k, _ in da]} vs {[k for k, _ in db]}")
    cm = f"ConfigMap/{a.configmap}"
    ta, tb = dict(da), dict(db)
    if cm not in ta:
        errors.append(f"no {cm} in {a.a}")
    elif ta.get(cm) == tb.get(cm):
        errors.append(f"{cm} is the same in both: the test needs two different configs")
    deployments = 0
    for key, text in da:
        if key == cm or key not in tb:
            continue
        deployments += key.startswith(("Deployment/", "StatefulSet/"))
        if tb[key] != text:
            errors.append(f"{key} differs between the two configs: a config edit would change it")
    if deployments == 0:
        errors.append("no Deployment or StatefulSet to compare")
    for e in errors:
        print(f"{a.a} vs {a.b}: {e}", file=sys.stderr)
    if not errors:
        print(f"{a.a} vs {a.b}: only {cm} differs; {deployments} workload(s) byte-identical")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
