#!/usr/bin/env bash
# make realnode: Headroom against real kubelets in qemu guests (docs/development.md).
#
#  1. builds what is missing, cached beside the control plane's binaries
#     (hack/build-realnode.sh: the kubelet, containerd, runc, the CNI plugins, the guest
#     kernel, initramfs and root disk, the pause and probe images, Prometheus);
#  2. runs tests/realnode (or, with --bench, bench/realnode_bench.py; with --bench-tenant,
#     bench/tenant_bench.py; with --bench-pull, bench/realnode_pull_bench.py; with
#     --bench-idle, bench/realnode_idle_bench.py; with --demo ARGS...,
#     `python -m devcluster.demo ARGS...`, which is how `make demo DEMO_ARGS=--real-nodes`
#     gets here) in a network and mount namespace of its own: the guests' addresses exist
#     only there.
#
#   REALNODE_TESTS  what pytest runs (default tests/realnode; make e2e sets it)
#   REALNODE_ARGS   extra pytest arguments (or benchmark arguments with --bench)
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python

say() { printf 'realnode: %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
  say "needs root: network namespaces, tap devices, debootstrap"
  exit 1
fi
missing=()
for tool in qemu-system-x86_64 debootstrap unshare ip mkfs.ext4 dpkg-deb gcc; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
[ -f /usr/lib/x86_64-linux-gnu/libseccomp.a ] || missing+=(libseccomp-dev)
if [ ${#missing[@]} -gt 0 ]; then
  # .ci/run installs these; a machine running make realnode by hand may lack them.
  say "missing ${missing[*]}: install the Debian packages qemu-system-x86, libseccomp-dev," \
    "debootstrap, e2fsprogs and gcc (pinned versions in hack/versions.env)"
  exit 1
fi
if [ ! -c /dev/net/tun ]; then
  say "no /dev/net/tun: the guests' network cards are tap devices"
  exit 1
fi

start=$SECONDS
PYTHON=$python bash hack/build-realnode.sh >/dev/null
say "cached parts ready in $((SECONDS - start))s"

if [ "${1:-}" = --bench ]; then
  command=("$python" -m bench.realnode_bench ${REALNODE_ARGS:-})
elif [ "${1:-}" = --bench-idle ]; then
  command=("$python" -m bench.realnode_idle_bench ${REALNODE_ARGS:-})
elif [ "${1:-}" = --bench-pull ]; then
  command=("$python" -m bench.realnode_pull_bench ${REALNODE_ARGS:-})
elif [ "${1:-}" = --bench-tenant ]; then
  command=("$python" -m bench.tenant_bench ${REALNODE_ARGS:-})
elif [ "${1:-}" = --demo ]; then
  command=("$python" -m devcluster.demo "${@:2}")
else
  # shellcheck disable=SC2206  # a list of paths
  command=(.venv/bin/pytest ${REALNODE_TESTS:-tests/realnode} -v -p no:cacheprovider ${REALNODE_ARGS:-})
fi
say "running ${command[*]} in a network and mount namespace of its own"
# The tier checks the machine's own namespace from inside its own: it keeps a handle on
# it (read only through `ip`, never dialled from).
exec {host_netns}</proc/self/ns/net
export HEADROOM_HOST_NETNS_FD=$host_netns
HEADROOM_REALNODE=1 exec unshare --net --mount --propagation private -- "${command[@]}"
