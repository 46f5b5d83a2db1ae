#!/usr/bin/env bash
# Container image: build the Dockerfile's runtime stage with podman (chroot isolation; no
# Docker engine, no registry) on a Debian bookworm base made by debootstrap + podman import,
# with a binary built on the host, then run it: --version, `goodput check` on every example
# config mounted read-only into a read-only container, the daemon's /healthz, and a stop by
# `sh -c 'kill 1'` in the container; then the container recipe of docs/deploy.md as written,
# with podman for docker.
# usage: scripts/ci/podman.sh [PATH/TO/goodput]   (default: see lib.sh goodput_bin)
export CI_NAME=podman
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
[ "$(id -u)" -eq 0 ] || skip "podman chroot builds need root here"
ensure_apt podman buildah runc debootstrap curl
BIN=${1:-$(goodput_bin)}
[ -x "$BIN" ] || die "not an executable: $BIN"
IMAGE=localhost/goodput:ci
BASE=docker.io/library/debian:bookworm-slim
# crun cannot run here (cgroup v1/v2 hybrid, no CAP_SYS_RESOURCE); runc with low ulimits can.
RUN=(podman --runtime runc run --rm --network=none --ulimit nofile=1024:1024 --ulimit nproc=1000:1000)

# 1. Base image. The Dockerfile's FROM names Docker Hub's debian:bookworm-slim; build an
#    equivalent minbase rootfs from the Debian mirror apt already uses, cached as a tarball.
if ! podman image exists "$BASE"; then
  tarball=$CACHE/debootstrap/bookworm-minbase.tar
  if [ ! -s "$tarball" ]; then
    mirror=$( { grep -rhoE '^(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null || true; } \
             | awk '{print $2}' | grep -E '/debian/?$' | head -1 || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    rootfs=$(mktemp -d)
    log "debootstrap --variant=minbase bookworm from $mirror (about a minute)"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
      || { tail -20 "$CACHE/debootstrap.log" >&2; rm -rf "$rootfs"; die "debootstrap failed"; }
    # Docker Hub's slim image also drops apt lists; keep the sources so apt-get update works.
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
    mkdir -p "$(dirname "$tarball")"
    tar -C "$rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
  fi
  log "podman import $tarball"
  podman import --change 'CMD ["/bin/bash"]' "$tarball" "$BASE" >/dev/null || die "podman import failed"
fi

# 2. Build the runtime stage from a minimal context: the Dockerfile and the host binary.
ctx=$(mktemp -d); trap 'rm -rf "$ctx"' EXIT
cp Dockerfile .dockerignore "$ctx/"
install -D -m 0755 "$BIN" "$ctx/prebuilt/goodput"
log "podman build --isolation=chroot --target runtime-prebuilt (binary: $BIN)"
podman build --isolation=chroot --pull=never --target runtime-prebuilt -t "$IMAGE" "$ctx" >&2 \
  || die "podman build failed"

user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
[ "$user" = "65532:65532" ] || die "image USER is '$user', want 65532:65532"
entry=$(podman image inspect --format '{{json .Config.Entrypoint}} {{json .Config.Cmd}}' "$IMAGE")
[ "$entry" = '["/usr/local/bin/goodput"] ["run","--config","/etc/goodput/config.yaml"]' ] \
  || die "unexpected ENTRYPOINT/CMD: $entry"

# 3. Run it: read-only root filesystem, non-root, config from a mounted file.
want=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)
out=$("${RUN[@]}" --read-only "$IMAGE" --version 2>&1) || die "goodput --version failed in the container: $out"
log "in container: $out"
grep -q "$want" <<<"$out" || die "--version printed '$out', want version $want"
uid=$("${RUN[@]}" --read-only --entrypoint /usr/bin/id "$IMAGE" -u) || die "id -u failed"
[ "$uid" = 65532 ] || die "container runs as uid $uid"
"${RUN[@]}" --read-only "$IMAGE" --help >/dev/null || die "goodput --help failed in the container"

for cfg in config/*.yaml; do
  if out=$("${RUN[@]}" --read-only -v "$ROOT/$cfg:/etc/goodput/config.yaml:ro,Z" \
            "$IMAGE" check --config /etc/goodput/config.yaml 2>&1); then
    log "goodput check $cfg: ok"
  elif daemon_missing "$out"; then
    daemon_skip "goodput check in the container: $out"; break
  else
    printf '%s\n' "$out" >&2; die "goodput check failed in the container on $cfg"
  fi
done

# 4. The daemon itself in a read-only, non-root container: /healthz must answer. The
#    target is a closed loopback port, so this needs no engine and proves the daemon
#    stays up (and healthy) while its target is down.
port=$(free_port)
printf 'listen: 127.0.0.1:%s\nscrape: {interval: 1s, timeout: 500ms}\ntargets:\n  - {name: nothing, url: "http://127.0.0.1:9/metrics", engine: vllm}\nwindows: [1m]\n' \
  "$port" >"$ctx/run.yaml"
cid=$(podman --runtime runc run -d --network=host --ulimit nofile=1024:1024 --ulimit nproc=1000:1000 --read-only \
      -v "$ctx/run.yaml:/etc/goodput/config.yaml:ro,Z" "$IMAGE") || die "podman run -d failed"
healthy=0
for _ in $(seq 1 40); do
  if curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then healthy=1; break; fi
  [ "$(podman inspect -f '{{.State.Running}}' "$cid" 2>/dev/null)" = true ] || break
  sleep 0.5
done
logs=$(podman logs "$cid" 2>&1 | tail -20)
if [ "$healthy" = 1 ]; then
  log "goodput run in the read-only container: /healthz ok"
  # How docs/kubernetes.md restarts goodput alone: SIGTERM to PID 1 from inside the
  # container (the image's sh). goodput exits 0 within its 5 s shutdown bound.
  podman exec "$cid" sh -c 'kill 1' || die "sh -c 'kill 1' failed in the container"
  status=$(timeout 15 podman wait "$cid" 2>/dev/null || echo none)
  podman rm -f "$cid" >/dev/null 2>&1 || true
  [ "$status" = 0 ] || die "after sh -c 'kill 1' goodput exited with status $status, want 0 within 15 s"
  log "sh -c 'kill 1' in the container: goodput exited 0"
elif daemon_missing "$logs"; then
  podman rm -f "$cid" >/dev/null 2>&1 || true
  daemon_skip "goodput run in the container: $logs"
else
  podman rm -f "$cid" >/dev/null 2>&1 || true
  printf '%s\n' "$logs" >&2; die "goodput run in the container never answered /healthz on 127.0.0.1:$port"
fi

# 5. The container recipe of docs/deploy.md, run as written in this checkout with podman
#    standing in for docker (scripts/ci/shims/docker): the build is the runtime-prebuilt
#    stage of the same Dockerfile, and the push goes nowhere.
mkdir -p "$ctx/recipe/bin"
cp scripts/ci/shims/docker "$ctx/recipe/bin/"
python3 scripts/ci/doc_recipes.py extract docs/deploy.md --out "$ctx/recipe" --repo "$ROOT" --only container >"$ctx/recipe/runs.tsv" \
  || die "docs/deploy.md has code blocks CI does not check"
grep -q . "$ctx/recipe/runs.tsv" || die "docs/deploy.md has no container recipe"
while IFS=$'\t' read -r _ _ script; do
  log "run $(head -1 "$script" | sed 's/^# //')"
  PODMAN_CONTEXT=$ctx PATH="$ctx/recipe/bin:$PATH" bash -e -o pipefail "$script" >&2 \
    || die "the container recipe failed as docs/deploy.md shows it"
done <"$ctx/recipe/runs.tsv"
grep -ohE '[a-z0-9.-]+/goodput:[0-9A-Za-z.-]+' "$ctx/recipe"/.run-*.sh | sort -u | while read -r tag; do
  podman rmi -f "$tag" >/dev/null 2>&1 || true
done
log "PASS"
