#!/usr/bin/env bash
# The stress run: scripts/stress.sh [N]   (default 500)
#
# Builds the debug binary, makes a scratch lakehouse with `lakedrill demo` (which itself runs the whole pipeline:
# plan, quarantine, drill run, audit verify, purge, backup, cold-backup drill, gates), then runs each pipeline
# command N times on it, every invocation under `timeout` (STRESS_TIMEOUT seconds, default 120):
#   plan · quarantine · drill run · purge --dry-run · audit verify --chain · gates --trust · hold list
# Any verdict is accepted (exit 0, 1 or 2: a purged candidate's second quarantine is refused); what fails the
# run is an invocation that goes past its timeout (exit 124, killed), a crash (a signal, or exit 101 for a
# panic) or stdout that is not one JSON document. It prints one line per 50 invocations and, at the end, the
# number of invocations, the verdicts per command, the slowest invocation and the time taken; exit 1 on any
# failure (the failing invocations' stderr is kept in the scratch folder, printed at the end).
# STRESS_DIR (default: a fresh mktemp folder, removed on success) holds the lakehouse; STRESS_KEEP=1 keeps it.
# LAKEDRILL_BIN=PATH runs an existing binary instead of building one (`cargo build --bin` alone resolves other
# dependency features than `cargo test` and rebuilds much of the tree).
# See: issue 16 point 6 — one quarantine in 530 spun at exit for minutes (sqlx 0.8, sqlx#3645).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N=${1:-500}
TIMEOUT=${STRESS_TIMEOUT:-120}
[[ $N =~ ^[0-9]+$ && $N -gt 0 ]] || { echo "scripts/stress.sh: N must be a positive integer, not $N" >&2; exit 2; }
command -v timeout >/dev/null || { echo "scripts/stress.sh: timeout(1) (coreutils) is needed" >&2; exit 2; }

if [[ -n ${LAKEDRILL_BIN:-} ]]; then
  BIN=$LAKEDRILL_BIN  # an existing build (the one `cargo test` made, say), not rebuilt
  [[ -x $BIN ]] || { echo "scripts/stress.sh: LAKEDRILL_BIN=$BIN is not executable" >&2; exit 2; }
else
  echo "== building the debug binary"
  cargo build --quiet --bin lakedrill
  BIN=$PWD/target/debug/lakedrill
fi
SCRATCH=${STRESS_DIR:-$(mktemp -d /tmp/lakedrill-stress.XXXXXX)}
mkdir -p "$SCRATCH"
LAKE=$SCRATCH/lake
LOGS=$SCRATCH/failures
mkdir -p "$LOGS"

echo "== lakedrill demo --dir $LAKE (timeout ${TIMEOUT}0 s)"
timeout "${TIMEOUT}0" "$BIN" --json -q demo --dir "$LAKE" >"$SCRATCH/demo.json" 2>"$SCRATCH/demo.stderr" || {
  rc=$?; cat "$SCRATCH/demo.stderr" >&2; echo "scripts/stress.sh: the demo failed (exit $rc)" >&2; exit 1; }
read -r CANDIDATE REPORT < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["plan"]["candidates"][0]["candidate_id"], d["drill"]["report"])' "$SCRATCH/demo.json")

T=(--catalog demo --table sales.orders)
declare -A ARGS=(
  [plan]="plan ${T[*]} --policy policy.yaml"
  [quarantine]="quarantine $CANDIDATE ${T[*]} --policy policy.yaml --key keys/demo-drill.key --bundles bundles"
  [drill-run]="drill run drills/weekly-quarantine.toml"
  [purge-dry-run]="purge $CANDIDATE ${T[*]} --policy policy.yaml --trust keys/trust --key keys/demo-deleter.key --receipts receipts --evidence $REPORT --dry-run"
  [audit-verify]="audit verify $REPORT --trust keys/trust --chain"
  [gates]="gates ${T[*]} --policy policy.yaml --trust keys/trust --reports reports"
  [hold-list]="hold list ${T[*]}"
)
ORDER=(plan quarantine drill-run purge-dry-run audit-verify gates hold-list)
declare -A CODES=()
failures=0 total=0 slowest=0 slowest_what=
start=$(date +%s)
echo "== $N rounds of ${#ORDER[@]} commands, each under timeout ${TIMEOUT}s"
for ((i = 1; i <= N; i++)); do
  for name in "${ORDER[@]}"; do
    total=$((total + 1))
    t0=$(date +%s%N)
    # shellcheck disable=SC2086 # the arguments are word-split on purpose (no spaces in them)
    set +e
    (cd "$LAKE" && timeout "$TIMEOUT" "$BIN" --json -q ${ARGS[$name]} >"$SCRATCH/out.json" 2>"$SCRATCH/err.txt")
    rc=$?
    set -e
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    if ((ms > slowest)); then slowest=$ms; slowest_what="$name (round $i)"; fi
    CODES[$name]="${CODES[$name]:-} $rc"
    bad=
    if ((rc == 124 || rc == 137)); then bad="ran past its timeout of ${TIMEOUT}s"
    elif ((rc > 2)); then bad="crashed (exit $rc)"
    elif ! python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$SCRATCH/out.json" 2>/dev/null; then
      bad="stdout is not one JSON document"; fi
    if [[ -n $bad ]]; then
      failures=$((failures + 1))
      cp "$SCRATCH/err.txt" "$LOGS/$name-$i.stderr"
      echo "FAIL round $i $name: $bad (stderr: $LOGS/$name-$i.stderr)" >&2
    fi
    if ((total % 50 == 0)); then echo "   $total invocations, $failures failed, $(( $(date +%s) - start ))s"; fi
  done
done
echo "== $total invocations ($N per command) in $(( $(date +%s) - start ))s; slowest ${slowest} ms: $slowest_what"
for name in "${ORDER[@]}"; do
  # shellcheck disable=SC2086
  echo "   $name: exit codes $(printf '%s\n' ${CODES[$name]} | sort | uniq -c | awk '{printf "%s×%s ", $1, $2}')"
done
if ((failures > 0)); then
  echo "scripts/stress.sh: $failures of $total invocations failed; lakehouse and logs kept in $SCRATCH" >&2
  exit 1
fi
echo "== no invocation ran past its timeout"
if [[ -z ${STRESS_DIR:-} && ${STRESS_KEEP:-} != 1 ]]; then rm -rf "$SCRATCH"; fi
