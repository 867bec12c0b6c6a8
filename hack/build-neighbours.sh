#!/usr/bin/env bash
# Builds (once) the components users run beside Headroom that the integration tier runs
# for real, into version-keyed caches beside the control plane's:
#   karpenter-<v>/bin/karpenter-kwok  Karpenter with its KWOK cloud provider
#                                     (sigs.k8s.io/karpenter/kwok, from a wrapper module)
#   karpenter-<v>/crds                its CRDs (NodePool, NodeClaim, NodeOverlay,
#                                     CapacityBuffer, KWOKNodeClass), copied verbatim
#   vpa-<v>/bin/vpa-{recommender,updater,admission-controller}
#                                     the VerticalPodAutoscaler's three components
#                                     (k8s.io/autoscaler/vertical-pod-autoscaler)
#   metrics-server-<v>/bin/metrics-server
#                                     the resource metrics API they read (sigs.k8s.io/metrics-server)
# Re-running is cheap: whatever is present is kept. Prints the Karpenter directory.
#
#   HEADROOM_CACHE  cache root (default: ~/.cache/headroom)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${HEADROOM_CACHE:-$HOME/.cache/headroom}
dir="$cache/karpenter-$KARPENTER_VERSION"
mkdir -p "$dir"
# Karpenter's go.mod asks for a newer Go than the machine's: the go command fetches the
# pinned toolchain through the module proxy (once; it stays in the module cache).
export GOFLAGS=-mod=mod GOTOOLCHAIN=$KARPENTER_GO_TOOLCHAIN CGO_ENABLED=0

log() { printf '[neighbours] %s\n' "$*" >&2; }

# Two builds into the same cache would clash.
exec 9>"$cache/.neighbours-build.lock"
flock 9

build_karpenter() {
  [ -x "$dir/bin/karpenter-kwok" ] && [ -f "$dir/crds/.complete" ] && return 0
  local module=sigs.k8s.io/karpenter start=$SECONDS src
  log "building karpenter-kwok from $module@$KARPENTER_VERSION"
  mkdir -p "$dir/src" "$dir/bin" "$dir/crds"
  printf 'module headroom.local/karpenter\n\ngo 1.26\n\nrequire %s %s\n' \
    "$module" "$KARPENTER_VERSION" >"$dir/src/go.mod"
  # Its main package is built from the module itself; the wrapper only pins the version.
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s/kwok"\n' "$module" >"$dir/src/tools.go"
  (cd "$dir/src" && go mod tidy >/dev/null &&
    go build -trimpath -ldflags "-s -w" -o "$dir/bin/karpenter-kwok.tmp" "$module/kwok")
  mv "$dir/bin/karpenter-kwok.tmp" "$dir/bin/karpenter-kwok"
  src=$(cd "$dir/src" && go mod download -json "$module@$KARPENTER_VERSION" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  cp "$src"/pkg/apis/crds/*.yaml "$src"/kwok/apis/crds/*.yaml "$dir/crds/"
  chmod u+w "$dir/crds"/*.yaml
  touch "$dir/crds/.complete"
  log "karpenter-kwok: $((SECONDS - start))s"
}

# Builds main packages inside their own module, as it is released: its go.mod (replace
# directives included) and go.sum decide every dependency.
build_mains() {
  local module=$1 version=$2 out=$3 start=$SECONDS src name
  shift 3
  local missing=()
  for name in "$@"; do
    [ -x "$out/${name%%=*}" ] || missing+=("$name")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "building ${missing[*]%%=*} from $module@$version"
  mkdir -p "$out"
  src=$(GOFLAGS= go mod download -json "$module@$version" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  for name in "${missing[@]}"; do
    (cd "$src" && GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" \
      -o "$out/${name%%=*}.tmp" "./${name#*=}")
    mv "$out/${name%%=*}.tmp" "$out/${name%%=*}"
  done
  log "${missing[*]%%=*}: $((SECONDS - start))s"
}

build_karpenter
build_mains k8s.io/autoscaler/vertical-pod-autoscaler "$VPA_VERSION" "$cache/vpa-$VPA_VERSION/bin" \
  vpa-recommender=pkg/recommender vpa-updater=pkg/updater \
  vpa-admission-controller=pkg/admission-controller
build_mains sigs.k8s.io/metrics-server "$METRICS_SERVER_VERSION" \
  "$cache/metrics-server-$METRICS_SERVER_VERSION/bin" metrics-server=cmd/metrics-server
echo "$dir"
