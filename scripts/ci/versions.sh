#!/usr/bin/env bash
# One version everywhere: Cargo.toml's [package] version is the chart's `version` and
# `appVersion`, and every version the shipped files name for goodput agrees with it: image
# references `goodput:X.Y.Z` (and REGISTRY/goodput:X.Y.Z), kustomize `newTag:`, the chart's
# `goodput-X.Y.Z` label, `--branch vX.Y.Z`, in deploy/, docs/, README.md, the Dockerfile and
# the CI scripts. A copy with the chart's appVersion changed must fail.
# usage: scripts/ci/versions.sh
export CI_NAME=versions
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_venv PyYAML==6.0.3

check_versions() {
  python3 - "$1" <<'PY'
import pathlib, re, sys, tomllib, yaml
root = pathlib.Path(sys.argv[1])
version = tomllib.loads((root / "Cargo.toml").read_text())["package"]["version"]
errors = []
chart = yaml.safe_load((root / "deploy/helm/goodput/Chart.yaml").read_text())
for key in ("version", "appVersion"):
    if str(chart.get(key)) != version:
        errors.append(f"deploy/helm/goodput/Chart.yaml: {key} {chart.get(key)}, Cargo.toml says {version}")
SEMVER = r"[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)?"
PATTERNS = [re.compile(p) for p in (
    rf"goodput:({SEMVER})",            # image references
    rf"newTag:\s*\"?({SEMVER})",       # kustomize images
    rf"goodput-({SEMVER})\b",          # the chart's helm.sh/chart label
    rf"--branch\s+v({SEMVER})",        # a clone of a release
)]
files = [p for d in ("deploy", "docs") for p in (root / d).rglob("*") if p.is_file()]
files += [root / "README.md", root / "Dockerfile"] + sorted((root / "scripts/ci").glob("*.sh"))
seen = 0
for f in files:
    try:
        text = f.read_text()
    except (UnicodeDecodeError, FileNotFoundError):
        continue
    for n, line in enumerate(text.splitlines(), 1):
        for pat in PATTERNS:
            for m in pat.finditer(line):
                seen += 1
                if m.group(1) != version:
                    errors.append(f"{f.relative_to(root)}:{n}: {m.group(0)}, Cargo.toml says {version}")
if seen == 0:
    errors.append("no goodput version found in deploy/, docs/ or README.md: the patterns are out of date")
for e in errors:
    print(e, file=sys.stderr)
if not errors:
    print(f"version {version}: Cargo.toml, the chart and {seen} references agree")
sys.exit(1 if errors else 0)
PY
}

check_versions "$ROOT" >&2 || die "the versions disagree (above): one version for Cargo.toml, the chart, the image tags and the docs"
# The check must catch a disagreement: a copy whose chart names another appVersion.
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
mkdir -p "$T/deploy/helm/goodput" "$T/docs" "$T/scripts/ci"
cp Cargo.toml README.md Dockerfile "$T/"
cp deploy/helm/goodput/Chart.yaml "$T/deploy/helm/goodput/"
sed -i 's/^appVersion: .*/appVersion: "9.9.9"/' "$T/deploy/helm/goodput/Chart.yaml"
cp docs/deploy.md "$T/docs/"
if check_versions "$T" >/dev/null 2>&1; then die "versions check passed a chart whose appVersion is not Cargo.toml's"; fi
log "PASS"
