#!/usr/bin/env bash
# make test's tiers, in order: unit and integration (pytest, with the arguments given),
# then end-to-end and real-node, together on one boot of the real-node fleet.
#
# On a machine whose caches are cold, the end-to-end and real-node parts (Go builds,
# debootstrap) take about 18 minutes; they build meanwhile, at the lowest CPU priority, in
# whatever the tests leave idle, and the two tiers' own build steps then find them
# cached. On a warm machine that build is a no-op. Needs root (debootstrap), as those
# tiers do; without it, only the tiers' own steps build.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p _artifacts
# The components the integration tier runs beside Headroom (Karpenter, VPA, metrics-server,
# Flux) build meanwhile too, from a cold cache about 20 minutes of Go builds; a test that
# needs one before it is built builds it itself, or waits on that component's lock
# (devcluster.binaries.neighbour_dir).
neighbours_log=_artifacts/neighbours-build.log
setsid nice -n 10 bash hack/build-neighbours.sh >"$neighbours_log" 2>&1 &
neighbours=$!
trap 'kill -TERM -- -"$neighbours" 2>/dev/null || true' EXIT
log=_artifacts/parts-build.log
parts=
if [ "$(id -u)" = 0 ]; then
  setsid nice -n 19 bash -c 'bash hack/build-e2e.sh &&
    PYTHON=.venv/bin/python bash hack/build-realnode.sh >/dev/null' >"$log" 2>&1 &
  parts=$!
  # A failed tier stops make test: the builds go with it.
  trap 'kill -TERM -- -"$neighbours" -"$parts" 2>/dev/null || true' EXIT
fi
.venv/bin/pytest "$@"
if ! wait "$neighbours"; then
  tail -40 "$neighbours_log"
  echo "tiers: building the components beside Headroom failed (log $neighbours_log)"
  exit 1
fi
grep -E '^\[neighbours\] ' "$neighbours_log" || true
if [ -n "$parts" ]; then
  echo "tiers: waiting for the end-to-end and real-node parts (log $log)"
  if ! wait "$parts"; then
    tail -40 "$log"
    echo "tiers: building the end-to-end and real-node parts failed (log $log)"
    exit 1
  fi
  grep -E '^\[[a-z0-9-]+\] .*: [0-9]+s$' "$log" || true
fi
trap - EXIT
# The end-to-end and real-node tiers in one session: one boot of the fleet for both, with
# their slowest tests listed as the first half's are.
make --no-print-directory e2e E2E_TESTS="tests/e2e tests/realnode" E2E_ARGS="--durations=15"
