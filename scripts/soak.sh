#!/usr/bin/env bash
# The churn soak, longer: scripts/soak.sh [CYCLES [SECONDS]]   (defaults 30 and 0)
#
# Runs tests/it/soak.rs through scripts/test.sh (venv, fixtures, moto, PostgreSQL; the soak itself needs only the
# venv) with LAKEDRILL_SOAK_CYCLES=CYCLES and LAKEDRILL_SOAK_SECONDS=SECONDS: a PyIceberg writer commits to a
# table continuously (appends, deletes, overwrites, tag and branch moves), a churner adds and releases leases
# and holds on random snapshots, and lakedrill runs at least CYCLES cycles of plan → quarantine → drill → purge →
# drill → gates, going on until SECONDS have passed as well. It prints one line per cycle (quarantine refusals,
# drill population, purge outcome, rebases, objects, data files and bytes deleted, leased or held snapshots
# checked) and a summary; it exits with the test's code (0 only when every check passed).
# LAKEDRILL_SOAK_SEED=N repeats a run's writer and churner choices (the seed is printed; timing still differs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CYCLES=${1:-30}
SECONDS_MIN=${2:-0}
[[ $CYCLES =~ ^[0-9]+$ && $CYCLES -gt 0 ]] || { echo "scripts/soak.sh: CYCLES must be a positive integer, not $CYCLES" >&2; exit 2; }
[[ $SECONDS_MIN =~ ^[0-9]+$ ]] || { echo "scripts/soak.sh: SECONDS must be a non-negative integer, not $SECONDS_MIN" >&2; exit 2; }
export LAKEDRILL_SOAK_CYCLES=$CYCLES LAKEDRILL_SOAK_SECONDS=$SECONDS_MIN
start=$(date +%s)
set +e
./scripts/test.sh --test it -- soak:: --nocapture
rc=$?
set -e
echo "== scripts/soak.sh $CYCLES $SECONDS_MIN: exit $rc after $(( $(date +%s) - start ))s (including the build)"
exit "$rc"
