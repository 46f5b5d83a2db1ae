#!/usr/bin/env python3
"""Pull spec.groups out of every PrometheusRule in rendered manifests into one
Prometheus rule file, for `promtool check rules`. Exits 1 when none is found.
usage: extract_rules.py RENDERED.yaml... OUT.yml"""
import sys

import yaml


def main() -> int:
    *inputs, out = sys.argv[1:]
    groups = []
    for path in inputs:
        with open(path, encoding="utf-8") as f:
            for doc in yaml.safe_load_all(f):
                if doc and doc.get("kind") == "PrometheusRule":
                    groups.extend(doc.get("spec", {}).get("groups", []))
    if not groups:
        print(f"no PrometheusRule groups in {inputs}", file=sys.stderr)
        return 1
    with open(out, "w", encoding="utf-8") as f:
        yaml.safe_dump({"groups": groups}, f, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
