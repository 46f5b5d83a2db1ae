#!/usr/bin/env bash
# The CI scripts themselves: shellcheck (Debian) with no findings.
export CI_NAME=shellcheck
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_apt shellcheck
shellcheck -x scripts/ci/*.sh || die "shellcheck reported findings"
log "PASS"
