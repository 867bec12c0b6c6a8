#!/usr/bin/env bash
# make test's second lane (hack/tiers.sh): the end-to-end and real-node tiers in one
# session on one boot of the real-node fleet, after building their parts.
#
# This lane is the longer one, so its build (about 20 CPU-minutes from a cold cache, a
# no-op on a warm one) runs at the first lane's priority, not in what that lane leaves
# idle; its tests run at a higher priority than the first lane's, since an emulated guest
# starved of CPU misses its probes and its kubelet restarts containers, while the first
# lane's tests only take longer and fill the cores while the guests wait.
#
#   fleet-lane.sh PARTS_LOG   the build's log
set -euo pipefail
cd "$(dirname "$0")/.."
parts_log=$1

# With the kernel's autogroup scheduling, each session (this lane is one) shares the cores
# by its group's nice value, not by its processes'; without it, by each process's.
priority() {
  echo "$1" 2>/dev/null >/proc/self/autogroup || true
  renice -n "$1" -p $$ >/dev/null 2>&1 || true
}

# Only root can build them (debootstrap); make e2e says so otherwise.
if [ "$(id -u)" = 0 ]; then
  if ! { bash hack/build-e2e.sh &&
    PYTHON=.venv/bin/python bash hack/build-realnode.sh >/dev/null; } >"$parts_log" 2>&1; then
    tail -40 "$parts_log"
    echo "tiers: building the end-to-end and real-node parts failed (log $parts_log)"
    exit 1
  fi
  grep -E '^\[[a-z0-9-]+\] .*: [0-9]+s$' "$parts_log" || true
  priority -10
fi
exec make --no-print-directory e2e E2E_TESTS="tests/e2e tests/realnode"
