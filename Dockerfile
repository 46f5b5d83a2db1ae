# syntax=docker/dockerfile:1
# goodput container image (docs/deploy.md#container-image). The tag is Cargo.toml's version,
# the one the manifests and the Helm chart name (scripts/ci/versions.sh):
#   docker build -t goodput:0.1.0 .                # builder stage compiles, runtime stage ships
#   docker run --read-only -v $PWD/config/sidecar.yaml:/etc/goodput/config.yaml:ro goodput:0.1.0
# Stages:
#   builder          cargo build --profile dist (LTO, stripped, with Kubernetes pod
#                    discovery: --features kubernetes) from the source tree
#   runtime-base     Debian slim + CA roots, non-root numeric user, entrypoint; no binary
#   runtime-prebuilt runtime-base + a binary built outside (prebuilt/goodput); used by
#                    scripts/ci/podman.sh, which has no registry to pull the Rust image from
#   runtime          runtime-base + the builder's binary (the default target)

ARG RUST_VERSION=1.89
ARG DEBIAN_SUITE=bookworm

FROM docker.io/library/rust:${RUST_VERSION}-${DEBIAN_SUITE} AS builder
WORKDIR /src
COPY . .
# The commit llm_slo_build_info and --version name (.git is not in the build context):
# podman build --build-arg GOODPUT_COMMIT=$(git rev-parse --short=12 HEAD) .
ARG GOODPUT_COMMIT=""
# Cache mounts keep the registry and target dir between builds; the binary is copied out
# of the cached target dir because cache mounts do not persist into the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --locked --profile dist --bin goodput --features kubernetes \
 && install -D -m 0755 target/dist/goodput /out/goodput

FROM docker.io/library/debian:${DEBIAN_SUITE}-slim AS runtime-base
# CA roots, needed only for https scrape targets. Not version-pinned: Debian drops a
# superseded version from the archive at each point release or security update, so an
# exact pin stops building within months (20230311+deb12u1 did). The suite (bookworm) fixes
# the major version; pin the base image by digest for byte-reproducible images. A
# non-empty CA_CERTIFICATES_VERSION still pins it, for a build that must match a record.
ARG CA_CERTIFICATES_VERSION=""
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends "ca-certificates${CA_CERTIFICATES_VERSION:+=${CA_CERTIFICATES_VERSION}}" \
 && rm -rf /var/lib/apt/lists/*
LABEL org.opencontainers.image.title="goodput" \
      org.opencontainers.image.description="PromQL-exact latency quantiles, SLO attainment and goodput for LLM inference engines" \
      org.opencontainers.image.licenses="Apache-2.0"
# goodput writes only to its state_dir, when its config has one (an emptyDir in the
# manifests): it runs with a read-only root filesystem, and its config is a file mounted at
# /etc/goodput/config.yaml (a ConfigMap in Kubernetes).
EXPOSE 9464
# Numeric, so Kubernetes' runAsNonRoot can verify it without an /etc/passwd lookup.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/goodput"]
CMD ["run", "--config", "/etc/goodput/config.yaml"]

FROM runtime-base AS runtime-prebuilt
COPY prebuilt/goodput /usr/local/bin/goodput

FROM runtime-base AS runtime
COPY --from=builder /out/goodput /usr/local/bin/goodput
