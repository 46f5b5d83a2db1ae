#!/usr/bin/env bash
# The CI scripts themselves, their shims (scripts/ci/shims/) and the Helm post-renderer
# pass shellcheck (Debian) with no findings.
export CI_NAME=shellcheck
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_apt shellcheck
shellcheck -x scripts/ci/*.sh scripts/ci/shims/* deploy/helm/post-renderer/goodput-sidecar || die "shellcheck reported findings"
log "PASS"
