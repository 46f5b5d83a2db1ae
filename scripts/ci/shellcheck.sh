#!/usr/bin/env bash
# The CI scripts themselves, and the Helm post-renderer: shellcheck (Debian) with no findings.
export CI_NAME=shellcheck
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_apt shellcheck
shellcheck -x scripts/ci/*.sh deploy/helm/post-renderer/goodput-sidecar || die "shellcheck reported findings"
log "PASS"
