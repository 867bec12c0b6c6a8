#!/usr/bin/env bash
# make e2e: the operator's install path end to end, every part real (docs/development.md).
#
#  1. builds what is missing, cached beside the control plane's binaries
#     (hack/build-e2e.sh: cert-manager, prometheus-operator and Prometheus from their Go
#     modules, Debian's docker-registry, a debootstrapped base root filesystem);
#  2. in the build store (python -m devcluster.containers env): imports the base image,
#     builds Headroom's image with `make docker-build` on it, and Prometheus's, the
#     Prometheus Operator's and its config reloader's from scratch;
#  3. runs tests/e2e on the real-node fleet (hack/realnode.sh, which builds the guests'
#     parts and gives the run a network and mount namespace of its own); with --images,
#     stops after step 2 (make bench-realnode-pull pushes those images).
#
#   E2E_TESTS  what pytest runs (default tests/e2e; make test adds tests/realnode, so the
#              two tiers share one boot of the fleet)
#   E2E_ARGS   extra pytest arguments
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=versions.env
source hack/versions.env
cache=${HEADROOM_CACHE:-$HOME/.cache/headroom}
python=.venv/bin/python

say() { printf 'e2e: %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
  say "needs root: containers, and the real-node fleet's network namespace"
  exit 1
fi
missing=()
for tool in podman runc debootstrap dpkg-deb; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "missing ${missing[*]}: install the Debian packages .ci/run installs" \
    "(podman buildah runc debootstrap, versions in hack/versions.env)"
  exit 1
fi

start=$SECONDS
bash hack/build-e2e.sh >/dev/null
say "cached parts ready in $((SECONDS - start))s"

eval "$($python -m devcluster.containers env)"
base=localhost/headroom-base:$DEBIAN_SUITE
rootfs=$cache/debian-$DEBIAN_SUITE/base-rootfs.tar
if ! podman image exists "$base" ||
  [ "$(podman image inspect --format '{{index .Labels "rootfs-mtime"}}' "$base")" != "$(stat -c %Y "$rootfs")" ]; then
  step=$SECONDS
  podman import --quiet --change "LABEL rootfs-mtime=$(stat -c %Y "$rootfs")" \
    --change 'CMD ["python3"]' "$rootfs" "$base" >/dev/null
  say "imported $base from $rootfs in $((SECONDS - step))s"
fi

build_log=$(mktemp)
context=$(mktemp -d)
trap 'rm -rf "$context" "$build_log"' EXIT
build() {  # the summary line; the whole log only when the build fails
  if ! "$@" >"$build_log" 2>&1; then
    tail -40 "$build_log"
    return 1
  fi
  tail -1 "$build_log"
}
# vfs makes even a fully cached build copy every layer, so an image built from the same
# inputs on the same base is reused outright: reuse IMAGE KEY COMMAND... builds IMAGE with
# COMMAND unless it exists and its last build's inputs hashed to KEY.
stamps=$cache/containers/build
mkdir -p "$stamps"
base_id=$(podman image inspect --format '{{.Id}}' "$base")
reuse() {
  local image=$1 key=$2 stamp
  stamp=$stamps/$(basename "${image%%:*}")-${image##*:}.context
  shift 2
  if podman image exists "$image" && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
    say "reused $image: same inputs and base as its last build"
  else
    build "$@"
    echo "$key" >"$stamp"
  fi
}
inputs_key() {  # the base image and the given files' contents
  { echo "$base_id"; sort -z | xargs -0 sha256sum; } | sha256sum | cut -d' ' -f1
}
image=localhost/kube-headroom:e2e
reuse "$image" "$(find Dockerfile .dockerignore pyproject.toml README.md app certs webhook \
  reconciler -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | inputs_key)" \
  make --no-print-directory docker-build IMG="$image" BASE_IMAGE="$base"

# The Prometheus server, the Prometheus Operator and its config reloader: each a static
# binary alone in its image, so a node pulls only that.
e2e_image() {  # e2e_image NAME:TAG BINARY
  local name=$1 binary=$2 containerfile=tests/e2e/images/${1%%:*}.Containerfile
  cp "$binary" "$context/"
  reuse "localhost/e2e/$name" "$(printf '%s\0' "$containerfile" "$binary" | inputs_key)" \
    bash hack/image-build.sh "localhost/e2e/$name" "$context" "$containerfile"
}
e2e_image "prometheus:$PROMETHEUS_VERSION" "$cache/prometheus-$PROMETHEUS_VERSION/bin/prometheus"
e2e_image "prometheus-operator:$PROMETHEUS_OPERATOR_VERSION" \
  "$cache/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION/bin/prometheus-operator"
e2e_image "prometheus-config-reloader:$PROMETHEUS_OPERATOR_VERSION" \
  "$cache/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION/bin/prometheus-config-reloader"
rm -rf "$context" "$build_log"
trap - EXIT
# Rebuilds leave the previous layers behind, and vfs stores each one whole; the recent
# ones are the build cache (the builder stage's are untagged), so only old ones go.
podman image prune --force --filter until=72h >/dev/null
$python -m devcluster.containers release
if [ "${1:-}" = --images ]; then
  say "images ready in the build store"
  exit 0
fi

say "running ${E2E_TESTS:-tests/e2e} on the real-node fleet"
HEADROOM_E2E=1 REALNODE_TESTS="${E2E_TESTS:-tests/e2e}" REALNODE_ARGS="${E2E_ARGS:-}" \
  exec bash hack/realnode.sh
