#!/usr/bin/env bash
# Builds (once) what the end-to-end install path runs besides the control plane, into
# version-keyed caches beside the control plane's:
#   cert-manager-<v>/bin         cert-manager-controller, cert-manager-cainjector
#                                (cert-manager's Go module; wiring in hack/go)
#   prometheus-operator-<v>/bin  prometheus-operator, prometheus-config-reloader
#   prometheus-operator-<v>/crds the monitoring.coreos.com CRDs of that release
#   prometheus-operator-<v>/deploy  that release's manifests for the operator's pod
#   prometheus-<v>/bin           the Prometheus server (its Go module, with the Kubernetes
#                                service discovery only)
#   debian-<suite>/              docker-registry, unpacked from its Debian package;
#                                base-rootfs.tar, a minimal root filesystem with python3
#                                (debootstrap)
# With the argument `prometheus`, only the Prometheus server is built.
# Re-running is cheap: whatever is present is kept. Packages come only from the Go
# module proxy and from the Debian archive the machine's apt is configured with.
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
export GOFLAGS="-mod=mod -gcflags=$GO_GCFLAGS" GOTOOLCHAIN=local CGO_ENABLED=0
# shellcheck source=debian.sh
source "$here/debian.sh"

log() { printf '[e2e-build] %s\n' "$*" >&2; }
timed() {  # what command...
  local what=$1 start=$SECONDS
  shift
  "$@"
  log "$what: $((SECONDS - start))s"
}

# Two builds into the same cache would clash.
exec 9>"$cache/.e2e-build.lock"
flock 9

# A wrapper module around a main package kept in hack/go that calls into cert-manager's
# module; rebuilt when that source or the pinned version changes.
build_cert_manager() {  # name
  local name=$1 module=github.com/cert-manager/cert-manager version=$CERT_MANAGER_VERSION
  local dir="$cache/cert-manager-$CERT_MANAGER_VERSION" src="$here/go/$1/main.go"
  local stamp key
  key=$(sha256sum "$src" | cut -d' ' -f1)
  stamp="$dir/bin/.$name.source"
  if [ -x "$dir/bin/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
    return 0
  fi
  log "building $name from $module@$version"
  mkdir -p "$dir/src/$name" "$dir/bin"
  cp "$src" "$dir/src/$name/main.go"
  printf 'module headroom.local/%s\n\ngo 1.26\n\nrequire %s %s\n' "$name" "$module" "$version" \
    >"$dir/src/$name/go.mod"
  (cd "$dir/src/$name" && go mod tidy >/dev/null &&
    go build -trimpath -gcflags "$GO_GCFLAGS_HOST_NEIGHBOUR" -ldflags "-s -w" -o "$dir/bin/$name.tmp" .)
  mv "$dir/bin/$name.tmp" "$dir/bin/$name"
  echo "$key" >"$stamp"
}

build_prometheus_operator() {
  local dir="$cache/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION"
  local module=github.com/prometheus-operator/prometheus-operator
  # binary=command package
  local want=(prometheus-operator=operator prometheus-config-reloader=prometheus-config-reloader)
  local missing=() pair
  for pair in "${want[@]}"; do [ -x "$dir/bin/${pair%=*}" ] || missing+=("$pair"); done
  if [ ${#missing[@]} -gt 0 ]; then
    log "building ${missing[*]%%=*} from $module@$PROMETHEUS_OPERATOR_VERSION"
    mkdir -p "$dir/src" "$dir/bin"
    # The release's go.mod replaces its API and client modules with its own tree, so
    # `go install …@version` refuses it; pin their published copies instead.
    cat >"$dir/src/go.mod" <<GOMOD
module headroom.local/prometheus-operator

go 1.26

require (
	$module $PROMETHEUS_OPERATOR_VERSION
	$module/pkg/apis/monitoring $PROMETHEUS_OPERATOR_VERSION
	$module/pkg/client $PROMETHEUS_OPERATOR_VERSION
)
GOMOD
    cat >"$dir/src/tools.go" <<GO
//go:build tools

package tools

import (
	_ "$module/cmd/operator"
	_ "$module/cmd/prometheus-config-reloader"
)
GO
    (cd "$dir/src" && go mod tidy >/dev/null)
    # The operator names its default config-reloader image after its own version.
    local stamp="-X github.com/prometheus/common/version.Version=${PROMETHEUS_OPERATOR_VERSION#v}"
    for pair in "${missing[@]}"; do
      (cd "$dir/src" && go build -trimpath -ldflags "-s -w $stamp" -o "$dir/bin/${pair%=*}.tmp" \
        "$module/cmd/${pair#*=}")
      mv "$dir/bin/${pair%=*}.tmp" "$dir/bin/${pair%=*}"
    done
  fi
  # Its CRDs, and the release's own manifests for running the operator as a pod: its
  # ServiceAccount, ClusterRole and binding, and Deployment.
  if [ ! -f "$dir/crds/.complete" ] || [ ! -f "$dir/deploy/.complete" ]; then
    local moddir
    moddir=$(cd "$dir/src" && go mod download -json "$module@$PROMETHEUS_OPERATOR_VERSION" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
    mkdir -p "$dir/crds" "$dir/deploy"
    cp "$moddir"/example/prometheus-operator-crd/monitoring.coreos.com_*.yaml "$dir/crds/"
    local part
    for part in service-account cluster-role cluster-role-binding deployment; do
      cp "$moddir/example/rbac/prometheus-operator/prometheus-operator-$part.yaml" "$dir/deploy/"
    done
    chmod u+w "$dir/crds"/*.yaml "$dir/deploy"/*.yaml
    touch "$dir/crds/.complete" "$dir/deploy/.complete"
  fi
}

# The Prometheus server from its Go module: Debian's build leaves Kubernetes service
# discovery out, and the operator's generated configuration depends on it. Prometheus
# registers every service discovery through its plugins package (plugins.go, generated
# from plugins.yml); this build compiles a copy of the release's module whose plugins.go
# names only the discoveries below, so the others and the cloud SDKs they pull in are
# never compiled (file and http discovery are always in). Measured here with an empty
# build cache: 221 s for every discovery, 126 s for these.
PROMETHEUS_DISCOVERIES="kubernetes"
build_prometheus() {
  local dir="$cache/prometheus-$PROMETHEUS_VERSION" module=github.com/prometheus/prometheus
  local stamp="$dir/bin/.discoveries"
  if [ -x "$dir/bin/prometheus" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$PROMETHEUS_DISCOVERIES" ]; then
    return 0
  fi
  log "building prometheus $PROMETHEUS_VERSION ($PROMETHEUS_DISCOVERIES discovery) from $module@$PROMETHEUS_MODULE_VERSION"
  mkdir -p "$dir/bin"
  local moddir src="$dir/src/prometheus" discovery
  moddir=$(cd "$dir" && go mod download -json "$module@$PROMETHEUS_MODULE_VERSION" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  rm -rf "$dir/src"
  mkdir -p "$dir/src"
  cp -r "$moddir" "$src"
  chmod -R u+w "$src"
  {
    printf '// Only the service discoveries hack/build-e2e.sh builds in.\npackage plugins\n\nimport (\n'
    for discovery in $PROMETHEUS_DISCOVERIES; do
      printf '\t_ "%s/discovery/%s"\n' "$module" "$discovery"
    done
    printf ')\n'
  } >"$src/plugins/plugins.go"
  local version="-X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v}"
  (cd "$src" && go build -trimpath -ldflags "-s -w $version" -o "$dir/bin/prometheus.tmp" ./cmd/prometheus)
  mv "$dir/bin/prometheus.tmp" "$dir/bin/prometheus"
  echo "$PROMETHEUS_DISCOVERIES" >"$stamp"
}


base_rootfs() {
  local dir="$cache/debian-$DEBIAN_SUITE" rootfs python
  [ -f "$dir/base-rootfs.tar" ] && return 0
  mkdir -p "$dir"
  rootfs=$(mktemp -d "$dir.rootfs.XXXXXX")
  debootstrap_tree "$rootfs" python3 "$dir.debootstrap.log"
  python=$(chroot "$rootfs" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [ "$python" != 3.11 ]; then
    log "$DEBIAN_SUITE's python3 is $python; the image needs 3.11"
    rm -rf "$rootfs"
    return 1
  fi
  tar_tree "$rootfs" "$dir/base-rootfs.tar"
}

case "${1:-all}" in
  prometheus)
    # The Prometheus server alone (the real-node tier's scraper).
    timed "prometheus" build_prometheus
    echo "$cache"
    exit 0
    ;;
  all) ;;
  *)
    echo "usage: $0 [prometheus]" >&2
    exit 2
    ;;
esac

timed "cert-manager-controller" build_cert_manager cert-manager-controller
timed "cert-manager-cainjector" build_cert_manager cert-manager-cainjector
timed "prometheus-operator" build_prometheus_operator
timed "prometheus" build_prometheus
timed "docker-registry (Debian)" deb_unpack docker-registry "$DOCKER_REGISTRY_DEB_VERSION" \
  "$cache/debian-$DEBIAN_SUITE/docker-registry-$DOCKER_REGISTRY_DEB_VERSION"
timed "base root filesystem" base_rootfs
echo "$cache"
