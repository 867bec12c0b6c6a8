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
#   flux-<versions>/bin/{source,kustomize,helm}-controller
#                                     Flux's GitOps controllers (github.com/fluxcd/...), from
#                                     one wrapper module
#   flux-<versions>/crds              their CRDs, copied verbatim
#   debian-<suite>/docker-registry-<v> the OCI registry Flux syncs from, unpacked from its
#                                     Debian package (as hack/build-e2e.sh does)
# Re-running is cheap: whatever is present is kept.
#
#   bash hack/build-neighbours.sh [karpenter|vpa|metrics-server|flux ...]   (default: all)
#
# Each component builds under a lock of its own, so a test that needs one waits only for
# that one while `make test` builds the rest in the background.
#
#   HEADROOM_CACHE  cache root (default: ~/.cache/headroom)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=go.env
source "$here/go.env"
cache=${HEADROOM_CACHE:-$HOME/.cache/headroom}
mkdir -p "$cache"
# Karpenter's go.mod asks for a newer Go than the machine's: the go command fetches the
# pinned toolchain through the module proxy (once; it stays in the module cache).
export GOFLAGS="-mod=mod -gcflags=$GO_GCFLAGS" GOTOOLCHAIN=$KARPENTER_GO_TOOLCHAIN CGO_ENABLED=0

log() { printf '[neighbours] %s\n' "$*" >&2; }
# shellcheck source=debian.sh
source "$here/debian.sh"

# Two builds of one component into the same cache would clash.
locked() {  # component command...
  local lock="$cache/.neighbours-$1.lock"
  shift
  (
    flock 9
    "$@"
  ) 9>"$lock"
}

build_karpenter() {
  local dir="$cache/karpenter-$KARPENTER_VERSION" module=sigs.k8s.io/karpenter start=$SECONDS src
  [ -x "$dir/bin/karpenter-kwok" ] && [ -f "$dir/crds/.complete" ] && return 0
  log "building karpenter-kwok from $module@$KARPENTER_VERSION"
  mkdir -p "$dir/src" "$dir/bin" "$dir/crds"
  printf 'module headroom.local/karpenter\n\ngo 1.26\n\nrequire %s %s\n' \
    "$module" "$KARPENTER_VERSION" >"$dir/src/go.mod"
  # Its main package is built from the module itself; the wrapper only pins the version.
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s/kwok"\n' "$module" >"$dir/src/tools.go"
  (cd "$dir/src" && go mod tidy >/dev/null &&
    go build -trimpath -gcflags "$GO_GCFLAGS_HOST_NEIGHBOUR" -ldflags "-s -w" \
      -o "$dir/bin/karpenter-kwok.tmp" "$module/kwok")
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
    (cd "$src" && GOFLAGS=-mod=readonly go build -trimpath -gcflags "$GO_GCFLAGS_HOST_NEIGHBOUR" -ldflags "-s -w" \
      -o "$out/${name%%=*}.tmp" "./${name#*=}")
    mv "$out/${name%%=*}.tmp" "$out/${name%%=*}"
  done
  log "${missing[*]%%=*}: $((SECONDS - start))s"
}

# Flux's three controllers from one wrapper module: their releases pin the same
# controller-runtime and nearly the same Kubernetes, Helm and fluxcd/pkg modules, so one
# module graph lets every shared package compile once. Each release replaces its API
# module with a directory its module archive leaves out: the wrapper requires the
# published API modules instead and keeps the releases' other, versioned, replaces (for
# go-digest, which two pseudo-versions pin, the newer).
build_flux() {
  local dir="$cache/flux-$FLUX_SOURCE_CONTROLLER_VERSION-$FLUX_KUSTOMIZE_CONTROLLER_VERSION-$FLUX_HELM_CONTROLLER_VERSION"
  local controllers=(source-controller kustomize-controller helm-controller) name missing=()
  for name in "${controllers[@]}"; do [ -x "$dir/bin/$name" ] || missing+=("$name"); done
  [ ${#missing[@]} -eq 0 ] && [ -f "$dir/crds/.complete" ] && return 0
  local start=$SECONDS module version moddir
  log "building ${missing[*]} from github.com/fluxcd"
  mkdir -p "$dir/src" "$dir/bin" "$dir/crds"
  {
    printf 'module headroom.local/flux\n\ngo 1.26\n\nrequire (\n'
    for name in "${controllers[@]}"; do
      version=$(flux_version "$name")
      printf '\tgithub.com/fluxcd/%s %s\n\tgithub.com/fluxcd/%s/api %s\n' \
        "$name" "$version" "$name" "$version"
    done
    printf ')\n\nreplace (\n'
    printf '\tgithub.com/opencontainers/go-digest => github.com/opencontainers/go-digest v1.0.1-0.20231025023718-d50d2fec9c98\n'
    printf '\tsigs.k8s.io/kustomize/api => sigs.k8s.io/kustomize/api v0.21.1\n'
    printf '\tsigs.k8s.io/kustomize/kyaml => sigs.k8s.io/kustomize/kyaml v0.21.1\n'
    printf '\tgopkg.in/yaml.v3 => gopkg.in/yaml.v3 v3.0.1\n)\n'
  } >"$dir/src/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for name in "${controllers[@]}"; do printf '\t_ "github.com/fluxcd/%s"\n' "$name"; done
    printf ')\n'
  } >"$dir/src/tools.go"
  (cd "$dir/src" && go mod tidy >/dev/null)
  for name in "${missing[@]}"; do
    (cd "$dir/src" && go build -trimpath -gcflags "$GO_GCFLAGS_HOST_NEIGHBOUR" -ldflags "-s -w" \
      -o "$dir/bin/$name.tmp" \
      "github.com/fluxcd/$name")
    mv "$dir/bin/$name.tmp" "$dir/bin/$name"
  done
  for name in "${controllers[@]}"; do
    version=$(flux_version "$name")
    moddir=$(cd "$dir/src" && go mod download -json "github.com/fluxcd/$name@$version" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
    cp "$moddir"/config/crd/bases/*.yaml "$dir/crds/"
  done
  chmod u+w "$dir/crds"/*.yaml
  touch "$dir/crds/.complete"
  log "${missing[*]}: $((SECONDS - start))s"
}

flux_version() {
  case $1 in
    source-controller) echo "$FLUX_SOURCE_CONTROLLER_VERSION" ;;
    kustomize-controller) echo "$FLUX_KUSTOMIZE_CONTROLLER_VERSION" ;;
    helm-controller) echo "$FLUX_HELM_CONTROLLER_VERSION" ;;
  esac
}

build() {  # component
  case $1 in
    karpenter) locked karpenter build_karpenter ;;
    vpa)
      locked vpa build_mains k8s.io/autoscaler/vertical-pod-autoscaler "$VPA_VERSION" \
        "$cache/vpa-$VPA_VERSION/bin" vpa-recommender=pkg/recommender \
        vpa-updater=pkg/updater vpa-admission-controller=pkg/admission-controller
      ;;
    metrics-server)
      locked metrics-server build_mains sigs.k8s.io/metrics-server "$METRICS_SERVER_VERSION" \
        "$cache/metrics-server-$METRICS_SERVER_VERSION/bin" metrics-server=cmd/metrics-server
      ;;
    flux)
      locked flux build_flux
      deb_unpack docker-registry "$DOCKER_REGISTRY_DEB_VERSION" \
        "$cache/debian-$DEBIAN_SUITE/docker-registry-$DOCKER_REGISTRY_DEB_VERSION"
      ;;
    *)
      log "unknown component $1: karpenter, vpa, metrics-server or flux"
      return 2
      ;;
  esac
}

if [ $# -eq 0 ]; then
  set -- karpenter vpa metrics-server flux
fi
for component in "$@"; do
  build "$component"
done
