#!/usr/bin/env bash
# Builds (once) what the real-node tier's qemu guests boot and run, into version-keyed
# caches beside the control plane's:
#   k8s-<v>/bin/kubelet, kube-proxy  the kubelet and kube-proxy of the control plane's
#                                  release (hack/build-control-plane.sh kubelet)
#   containerd-<v>/bin             containerd, containerd-shim-runc-v2, ctr
#   runc-<v>/bin/runc              static, with seccomp (cgo and Debian's libseccomp-dev)
#   cni-plugins-<v>/bin            bridge, host-local, loopback
#   realnode-tools/bin             node-agent (hack/go) and probe (tests/realnode/images),
#                                  rebuilt when their source changes
#   prometheus-<v>/bin/prometheus  the server that scrapes the kubelets' cAdvisor
#                                  (hack/build-e2e.sh prometheus)
#   debian-<suite>/<kernel>-<v>/   the guest kernel's Debian package, unpacked
#   debian-<suite>/busybox-static-<v>/  busybox for the initramfs, unpacked
#   debian-<suite>/node-rootfs.tar debootstrap minbase and what the node's init needs
#   realnode-<k8s v>/              vmlinuz, initramfs.cpio.gz (busybox, the disk and
#                                  filesystem modules, hack/realnode/initramfs-init) and
#                                  root.ext4: the root filesystem with the kernel's
#                                  modules, the node software above, the pause and probe
#                                  images and hack/realnode's init and containerd config;
#                                  rebuilt whenever any of its inputs changes
# Packages come only from the Go module proxy and from the Debian archive the machine's
# apt uses (apt-get download: nothing is installed). Needs root (debootstrap, chroot).
#
#   K8S_VERSION     Kubernetes release (default: pinned in versions.env)
#   HEADROOM_CACHE  cache root (default: ~/.cache/headroom)
# Prints the realnode-<k8s v> directory on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=go.env
source "$here/go.env"
K8S_VERSION=${K8S_VERSION:-$DEFAULT_K8S_VERSION}
export K8S_VERSION
cache=${HEADROOM_CACHE:-$HOME/.cache/headroom}
mkdir -p "$cache"
export GOFLAGS="-mod=mod -gcflags=$GO_GCFLAGS" GOTOOLCHAIN=local CGO_ENABLED=0
# shellcheck source=debian.sh
source "$here/debian.sh"
python=${PYTHON:-$repo/.venv/bin/python}
debian="$cache/debian-$DEBIAN_SUITE"
kernel_dir="$debian/$GUEST_KERNEL_PACKAGE-$GUEST_KERNEL_DEB_VERSION"
busybox_dir="$debian/busybox-static-$BUSYBOX_STATIC_DEB_VERSION"
tools="$cache/realnode-tools/bin"
out="$cache/realnode-$K8S_VERSION"
# What the node's init runs besides the kubelet, kube-proxy, containerd and runc (kube-proxy's
# nftables mode drives the kernel through nft).
NODE_PACKAGES=tini,iproute2,kmod,nftables
PAUSE_IMAGE=localhost/headroom/pause:$K8S_VERSION
PROBE_IMAGE=localhost/headroom/probe:1

log() { printf '[realnode-build] %s\n' "$*" >&2; }
timed() {  # what command...
  local what=$1 start=$SECONDS
  shift
  "$@"
  log "$what: $((SECONDS - start))s"
}

if [ "$(id -u)" != 0 ]; then
  log "needs root: debootstrap and chroot build the guests' root filesystem"
  exit 1
fi
# Two builds into the same cache would clash.
exec 9>"$cache/.realnode-build.lock"
flock 9

go_install() {  # directory binary package@version [go flags...]
  local dir=$1 name=$2 pkg=$3
  shift 3
  [ -x "$dir/$name" ] && return 0
  log "building $name from $pkg"
  mkdir -p "$dir" "$dir.gobin"
  GOBIN="$dir.gobin" go install -trimpath "$@" "$pkg"
  mv "$dir.gobin/$name" "$dir/$name"
  rmdir "$dir.gobin"
}

build_containerd() {
  local dir="$cache/containerd-$CONTAINERD_VERSION/bin" module=github.com/containerd/containerd/v2
  local stamp="-s -w -X $module/version.Version=$CONTAINERD_VERSION"
  for name in containerd containerd-shim-runc-v2 ctr; do
    go_install "$dir" "$name" "$module/cmd/$name@$CONTAINERD_VERSION" -ldflags "$stamp"
  done
}

build_runc() {
  # runc's own static build: seccomp through cgo, statically linked against Debian's
  # libseccomp.a. The libpathrs tag of its Makefile needs a Rust library; without it runc
  # uses its Go fallback.
  CGO_ENABLED=1 go_install "$cache/runc-$RUNC_VERSION/bin" runc \
    "github.com/opencontainers/runc@$RUNC_VERSION" -buildmode=pie \
    -tags "seccomp urfave_cli_no_docs netgo osusergo" \
    -ldflags "-s -w -X main.version=${RUNC_VERSION#v} -linkmode external -extldflags -static-pie"
}

build_cni_plugins() {
  local dir="$cache/cni-plugins-$CNI_PLUGINS_VERSION/bin"
  local module=github.com/containernetworking/plugins/plugins
  for pkg in main/bridge ipam/host-local main/loopback; do
    go_install "$dir" "${pkg#*/}" "$module/$pkg@$CNI_PLUGINS_VERSION" -ldflags "-s -w"
  done
}

# A static Go program of this repository, in a module of its own; rebuilt when its
# source changes.
build_tool() {  # name source-directory
  local name=$1 src=$2 key stamp work
  key=$(cat "$src"/*.go | sha256sum | cut -d' ' -f1)
  stamp="$tools/.$name.source"
  if [ -x "$tools/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
    return 0
  fi
  log "building $name from $src"
  work="$cache/realnode-tools/src/$name"
  mkdir -p "$work" "$tools"
  cp "$src"/*.go "$work/"
  printf 'module headroom.local/%s\n\ngo 1.26\n' "$name" >"$work/go.mod"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$tools/$name.tmp" .)
  mv "$tools/$name.tmp" "$tools/$name"
  echo "$key" >"$stamp"
}

# The pause image's program is the kubelet release's own C source, compiled statically.
build_pause() {
  local moddir
  [ -x "$out/pause" ] && return 0
  moddir=$(cd "$cache" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  mkdir -p "$out"
  gcc -Os -Wall -Werror -static -DVERSION="$K8S_VERSION-headroom" \
    -o "$out/pause.tmp" "$moddir/build/pause/linux/pause.c"
  mv "$out/pause.tmp" "$out/pause"
}

node_rootfs() {
  local tar="$debian/node-rootfs.tar" stamp="$debian/node-rootfs.packages" rootfs
  if [ -f "$tar" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$NODE_PACKAGES" ]; then
    return 0
  fi
  mkdir -p "$debian"
  rootfs=$(mktemp -d "$debian/node-rootfs.XXXXXX")
  debootstrap_tree "$rootfs" "$NODE_PACKAGES" "$debian/node-rootfs.debootstrap.log"
  tar_tree "$rootfs" "$tar"
  echo "$NODE_PACKAGES" >"$stamp"
}

kernel_release() {
  local modules
  modules=("$kernel_dir"/lib/modules/*)
  basename "${modules[0]}"
}

# Everything the guest image is made from: when none of it changed, the image stays.
image_key() {
  {
    echo "$K8S_VERSION $CONTAINERD_VERSION $RUNC_VERSION $CNI_PLUGINS_VERSION"
    echo "$GUEST_KERNEL_PACKAGE $GUEST_KERNEL_DEB_VERSION $BUSYBOX_STATIC_DEB_VERSION"
    cat "$debian/node-rootfs.packages"
    stat -c '%n %s %Y' "$debian/node-rootfs.tar" "$cache/k8s-$K8S_VERSION/bin/kubelet" \
      "$cache/k8s-$K8S_VERSION/bin/kube-proxy" \
      "$cache/containerd-$CONTAINERD_VERSION"/bin/* "$cache/runc-$RUNC_VERSION/bin/runc" \
      "$cache/cni-plugins-$CNI_PLUGINS_VERSION"/bin/* "$tools"/* "$out/pause"
    cat "$here"/realnode/* "$repo/devcluster/ociimage.py"
  } | sha256sum | cut -d' ' -f1
}

initramfs() {  # staged root filesystem (its modules.dep and modules)
  local stage=$1 release dir
  release=$(kernel_release)
  dir=$(mktemp -d "$out/initramfs.XXXXXX")
  mkdir -p "$dir"/{bin,dev,proc,sys,newroot} "$dir/lib/modules/$release"
  cp "$busybox_dir/bin/busybox" "$dir/bin/busybox"
  cp "$here/realnode/initramfs-init" "$dir/init"
  chmod 0755 "$dir/init"
  cp "$stage/lib/modules/$release"/modules.{dep,alias,softdep,builtin} "$dir/lib/modules/$release/"
  # The modules the initramfs loads and everything modules.dep says they need.
  python3 - "$stage/lib/modules/$release" virtio_pci virtio_blk crc32c_generic ext4 <<'PY' |
import sys
root, wanted = sys.argv[1], sys.argv[2:]
deps = {}
for line in open(f"{root}/modules.dep"):
    module, _, needs = line.partition(":")
    deps[module] = needs.split()
by_name = {m.rsplit("/", 1)[-1].split(".ko")[0].replace("-", "_"): m for m in deps}
seen, todo = set(), [by_name[w] for w in wanted if w in by_name]
while todo:
    module = todo.pop()
    if module not in seen:
        seen.add(module)
        todo.extend(deps[module])
print("\n".join(sorted(seen)))
PY
    while read -r module; do
      mkdir -p "$dir/lib/modules/$release/$(dirname "$module")"
      cp "$stage/lib/modules/$release/$module" "$dir/lib/modules/$release/$module"
    done
  (cd "$dir" && find . -mindepth 1 | LC_ALL=C sort | "$busybox_dir/bin/busybox" cpio -o -H newc 2>/dev/null) |
    gzip -9 >"$out/initramfs.cpio.gz.tmp"
  rm -rf "$dir"
  mv "$out/initramfs.cpio.gz.tmp" "$out/initramfs.cpio.gz"
}

guest_image() {
  local key stage release size
  key=$(image_key)
  if [ -f "$out/root.ext4" ] && [ "$(cat "$out/.image-key" 2>/dev/null)" = "$key" ]; then
    return 0
  fi
  log "assembling the guest image for Kubernetes $K8S_VERSION"
  release=$(kernel_release)
  stage=$(mktemp -d "$out/stage.XXXXXX")
  chmod 0755 "$stage"
  tar -C "$stage" -xf "$debian/node-rootfs.tar"
  mkdir -p "$stage/lib/modules" "$stage/opt/cni/bin" "$stage/opt/headroom/images" \
    "$stage/etc/containerd"
  cp -a "$kernel_dir/lib/modules/$release" "$stage/lib/modules/"
  chroot "$stage" depmod "$release"
  install -m 0755 "$cache/k8s-$K8S_VERSION/bin/kubelet" "$cache/k8s-$K8S_VERSION/bin/kube-proxy" \
    "$cache/containerd-$CONTAINERD_VERSION"/bin/* "$cache/runc-$RUNC_VERSION/bin/runc" \
    "$tools/node-agent" "$stage/usr/local/bin/"
  install -m 0755 "$cache/cni-plugins-$CNI_PLUGINS_VERSION"/bin/* "$stage/opt/cni/bin/"
  install -m 0755 "$here/realnode/node-init" "$stage/opt/headroom/node-init"
  sed "s#@PAUSE_IMAGE@#$PAUSE_IMAGE#" "$here/realnode/containerd.toml" \
    >"$stage/etc/containerd/config.toml"
  (cd "$repo" && "$python" -m devcluster.ociimage --name "$PAUSE_IMAGE" \
    --add "/pause=$out/pause" --entrypoint /pause --out "$stage/opt/headroom/images/pause.tar")
  (cd "$repo" && "$python" -m devcluster.ociimage --name "$PROBE_IMAGE" \
    --add "/probe=$tools/probe" --entrypoint /probe --out "$stage/opt/headroom/images/probe.tar")
  initramfs "$stage"
  cp "$kernel_dir/boot/vmlinuz-$release" "$out/vmlinuz"
  # Room for containerd's images and containers, logs and a swap file; the file is
  # sparse, and every boot writes to a throwaway overlay (qemu's snapshot=on).
  size=$(($(du -sm "$stage" | cut -f1) + 1536))
  rm -f "$out/root.ext4.tmp"
  mkfs.ext4 -q -F -L headroom-node -O ^has_journal -E root_owner=0:0 -d "$stage" \
    "$out/root.ext4.tmp" "${size}M"
  rm -rf "$stage"
  mv "$out/root.ext4.tmp" "$out/root.ext4"
  echo "$key" >"$out/.image-key"
}

mkdir -p "$out"
timed "kubelet" bash "$here/build-control-plane.sh" kubelet >/dev/null
timed "prometheus" bash "$here/build-e2e.sh" prometheus >/dev/null
timed "containerd" build_containerd
timed "runc" build_runc
timed "CNI plugins" build_cni_plugins
timed "node-agent" build_tool node-agent "$here/go/node-agent"
timed "probe" build_tool probe "$repo/tests/realnode/images/probe"
timed "pause" build_pause
timed "guest kernel (Debian)" deb_unpack "$GUEST_KERNEL_PACKAGE" "$GUEST_KERNEL_DEB_VERSION" "$kernel_dir"
timed "busybox-static (Debian)" deb_unpack busybox-static "$BUSYBOX_STATIC_DEB_VERSION" "$busybox_dir"
timed "node root filesystem" node_rootfs
timed "guest image" guest_image
echo "$out"
