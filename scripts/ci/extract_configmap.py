#!/usr/bin/env python3
"""Write the `config.yaml` key of the first ConfigMap in rendered manifests to OUT,
so `goodput check` can validate what the chart or kustomization actually deploys.
usage: extract_configmap.py RENDERED.yaml OUT.yaml"""
import sys

import yaml


def main() -> int:
    src, out = sys.argv[1:]
    with open(src, encoding="utf-8") as f:
        for doc in yaml.safe_load_all(f):
            if doc and doc.get("kind") == "ConfigMap" and "config.yaml" in doc.get("data", {}):
                with open(out, "w", encoding="utf-8") as o:
                    o.write(doc["data"]["config.yaml"])
                return 0
    print(f"no ConfigMap with config.yaml in {src}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
