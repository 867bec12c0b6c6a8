#!/usr/bin/env bash
# make test's tiers, in two lanes at once:
#  - unit and integration (pytest, with the arguments given), in the foreground;
#  - end-to-end and real-node, together on one boot of the real-node fleet, in the
#    background, its output in _artifacts/fleet-tiers.log and followed here once the first
#    lane ends.
# The fleet's lane leaves the cores idle about a third of its time, waiting on kubelets,
# rate windows and token refreshes; the first lane fills that (docs/development.md, "Two
# lanes"). hack/fleet-lane.sh builds that lane's parts first.
# Needs root (debootstrap, the fleet's network namespace), as those tiers do; without it,
# make e2e says so and the run fails.
# Both lanes always run to their end, so one run reports every failing tier.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p _artifacts
# The components the integration tier runs beside Headroom (Karpenter, VPA, metrics-server,
# Flux) build meanwhile too, from a cold cache about 20 minutes of Go builds; a test that
# needs one before it is built builds it itself, or waits on that component's lock
# (devcluster.binaries.neighbour_dir). The integration tier's longest files are the ones
# that wait on them, so they build at the tests' own priority.
neighbours_log=_artifacts/neighbours-build.log
setsid bash hack/build-neighbours.sh >"$neighbours_log" 2>&1 &
neighbours=$!
parts_log=_artifacts/parts-build.log
fleet_log=_artifacts/fleet-tiers.log
: >"$parts_log"
setsid bash hack/fleet-lane.sh "$parts_log" >"$fleet_log" 2>&1 &
fleet=$!
# A stopped make test stops both background jobs.
trap 'kill -TERM -- -"$neighbours" -"$fleet" 2>/dev/null || true' EXIT

status=0
.venv/bin/pytest "$@" || status=$?
if ! wait "$neighbours"; then
  tail -40 "$neighbours_log"
  echo "tiers: building the components beside Headroom failed (log $neighbours_log)"
  status=1
fi
grep -E '^\[neighbours\] ' "$neighbours_log" || true
echo "tiers: the end-to-end and real-node tiers, running beside the above (log $fleet_log)"
tail -n +1 -f --pid="$fleet" "$fleet_log"
if ! wait "$fleet"; then
  status=1
fi
trap - EXIT
exit "$status"
