#!/usr/bin/env bash
# make test's second lane (hack/tiers.sh): the end-to-end and real-node tiers in one
# session on one boot of the real-node fleet, after building their parts.
#
# It runs at the first lane's CPU priority (docs/development.md, "Two lanes"): favouring
# the guests made the outage tests of the first lane miss their recovery budget, and
# building in what the first lane leaves idle put the longer lane's tests last.
#
#   fleet-lane.sh PARTS_LOG   the build's log
set -euo pipefail
cd "$(dirname "$0")/.."
parts_log=$1

# Only root can build them (debootstrap); make e2e says so otherwise.
if [ "$(id -u)" = 0 ]; then
  if ! { bash hack/build-e2e.sh &&
    PYTHON=.venv/bin/python bash hack/build-realnode.sh >/dev/null; } >"$parts_log" 2>&1; then
    tail -40 "$parts_log"
    echo "tiers: building the end-to-end and real-node parts failed (log $parts_log)"
    exit 1
  fi
  grep -E '^\[[a-z0-9-]+\] .*: [0-9]+s$' "$parts_log" || true
fi
exec make --no-print-directory e2e E2E_TESTS="tests/e2e tests/realnode"
