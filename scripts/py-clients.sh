#!/usr/bin/env bash
# Makes .ci-cache/py: a virtualenv with the real clients the request-path tests drive
# through the tap and against the OTLP receiver (tests/it/tools::python_clients).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .ci-cache/py/bin/python ] || python3 -m venv .ci-cache/py
.ci-cache/py/bin/python -m pip install -q --disable-pip-version-check \
  'openai>=1.50,<3' 'opentelemetry-sdk>=1.27,<2' 'opentelemetry-exporter-otlp-proto-http>=1.27,<2'
