#!/usr/bin/env bash
# Builds the test control plane from Go modules into a cache keyed by version:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, helm;
#   beside them, third-party CRDs (crds/) and KWOK's resource-metrics endpoint
#   (kwok/metrics-resource.yaml), taken from their modules as released.
# Re-running is cheap: binaries already present are kept. With the argument `helm`,
# builds helm alone (all the unit tier's chart tests need); with `kubelet`, the kubelet
# of the same release, from the same wrapper module and build cache (the real-node tier's
# guests run it; hack/build-realnode.sh asks for it).
#
#   K8S_VERSION   Kubernetes release to build (default: pinned below)
#   HEADROOM_CACHE  cache root (default: ~/.cache/headroom)
# Prints the directory holding the binaries on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=go.env
source "$here/go.env"
K8S_VERSION=${K8S_VERSION:-$DEFAULT_K8S_VERSION}
cache=${HEADROOM_CACHE:-$HOME/.cache/headroom}
bin="$cache/k8s-$K8S_VERSION/bin"
work="$cache/k8s-$K8S_VERSION/src"
mkdir -p "$bin" "$work"
export GOFLAGS="-mod=mod -gcflags=$GO_GCFLAGS" GOTOOLCHAIN=local CGO_ENABLED=0
# kube binaries are large; trimming debug info halves link time and size.
# Admission plugins read the version (PodSecurity parses major/minor), so stamp it.
minor_num=${K8S_VERSION#v1.}; minor_num=${minor_num%%.*}
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor_num -X $vpkg.gitTreeState=clean"

log() { printf '[control-plane] %s\n' "$*" >&2; }

# Two builds of one release (test workers, a second checkout) would clash in its work tree.
exec 9>"$cache/k8s-$K8S_VERSION/.build.lock"
flock 9

build_kubernetes() {  # binaries of k8s.io/kubernetes/cmd to build
  local mod="$work/kubernetes" minor staging
  local want=("$@")
  local missing=()
  for b in "${want[@]}"; do [ -x "$bin/$b" ] || missing+=("$b"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "building ${missing[*]} from k8s.io/kubernetes@$K8S_VERSION"
  mkdir -p "$mod"
  minor="v0.${K8S_VERSION#v1.}"
  # The staging modules are v0.0.0 + replace in k8s.io/kubernetes's own go.mod;
  # a consumer must pin each to its published v0.X.Y. Derive the list from that go.mod.
  local gomod
  gomod=$(cd "$mod" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  staging=$(sed -nE 's#^\s*(k8s\.io/[A-Za-z0-9._-]+) => \./staging/.*#\1#p' "$gomod")
  {
    echo "module headroom.local/controlplane"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    for m in $staging; do echo "	$m => $m $minor"; done
    echo ")"
  } >"$mod/go.mod"
  cat >"$mod/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
GO
  (cd "$mod" && go mod tidy -e >/dev/null 2>&1 || true)
  for b in "${missing[@]}"; do
    log "go build $b"
    (cd "$mod" && go build -trimpath -ldflags "$ldflags" -o "$bin/$b.tmp" "k8s.io/kubernetes/cmd/$b")
    mv "$bin/$b.tmp" "$bin/$b"
  done
}

build_etcd() {
  [ -x "$bin/etcd" ] && return 0
  local mod="$work/etcd"
  log "building etcd from go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  mkdir -p "$mod"
  cat >"$mod/go.mod" <<GOMOD
module headroom.local/etcd

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
GOMOD
  cat >"$mod/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$mod" && go mod tidy >/dev/null && go build -trimpath -ldflags "-s -w" -o "$bin/etcd.tmp" .)
  mv "$bin/etcd.tmp" "$bin/etcd"
}

go_install() {  # name module-path@version [extra ldflags]
  local name=$1 pkg=$2 extra=${3:-}
  [ -x "$bin/$name" ] && return 0
  log "building $name from $pkg"
  GOBIN="$work/gobin" go install -trimpath -ldflags "-s -w $extra" "$pkg"
  mv "$work/gobin/$name" "$bin/$name"
}

# CRDs of cert-manager, prometheus-operator and the VerticalPodAutoscaler, copied
# verbatim from their modules' deploy manifests.
fetch_crds() {
  local crds="$cache/k8s-$K8S_VERSION/crds" dir
  [ -f "$crds/.complete" ] && return 0
  mkdir -p "$crds"
  moddir() { (cd "$work" && go mod download -json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'); }
  log "fetching third-party CRDs"
  dir=$(moddir "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION")
  for f in certificates certificaterequests issuers clusterissuers; do
    cp "$dir/deploy/crds/cert-manager.io_$f.yaml" "$crds/cert-manager.io_$f.yaml"
  done
  dir=$(moddir "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION")
  for f in servicemonitors prometheusrules; do
    cp "$dir/example/prometheus-operator-crd/monitoring.coreos.com_$f.yaml" "$crds/"
  done
  dir=$(moddir "k8s.io/autoscaler/vertical-pod-autoscaler@$VPA_VERSION")
  cp "$dir/deploy/vpa-v1-crd-gen.yaml" "$crds/autoscaling.k8s.io_verticalpodautoscalers.yaml"
  chmod u+w "$crds"/*.yaml
  touch "$crds/.complete"
}

# The Metric that makes KWOK serve a kubelet's /metrics/resource endpoint for its nodes,
# which metrics-server scrapes.
fetch_kwok_metrics() {
  local out="$cache/k8s-$K8S_VERSION/kwok" dir
  [ -f "$out/metrics-resource.yaml" ] && return 0
  mkdir -p "$out"
  dir=$(cd "$work" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  cp "$dir/kustomize/metrics/resource/metrics-resource.yaml" "$out/metrics-resource.yaml.tmp"
  chmod u+w "$out/metrics-resource.yaml.tmp"
  mv "$out/metrics-resource.yaml.tmp" "$out/metrics-resource.yaml"
}

build_helm() {
  # helm's default capabilities (what `helm template` renders for) otherwise claim an
  # old Kubernetes; match the control plane so kubeVersion constraints hold offline.
  local helm_k8s="" p
  for p in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    helm_k8s="$helm_k8s -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$minor_num"
  done
  go_install helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "$helm_k8s"
}

case "${1:-all}" in
  helm)
    build_helm
    ;;
  kubelet)
    build_kubernetes kubelet kube-proxy
    ;;
  all)
    build_etcd
    build_kubernetes kube-apiserver kube-controller-manager kube-scheduler kubectl
    go_install kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
    build_helm
    fetch_crds
    fetch_kwok_metrics
    ;;
  *)
    echo "usage: $0 [helm|kubelet]" >&2
    exit 2
    ;;
esac
echo "$bin"
