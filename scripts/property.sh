#!/usr/bin/env bash
# The dedicated property run: scripts/property.sh [cases] [seed]
# Runs the planner's safety property (no candidate object reachable from a retained snapshot, none
# under a writer or held prefix, no leased/checkpointed/ref'd/current snapshot in a candidate, orphans
# older than the safety interval) over `cases` random histories (default 10,000; the normal suite runs
# 1,000). The seed defaults to the current time and is printed, so a failure can be replayed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export LAKEDRILL_PROPERTY_CASES=${1:-10000}
export LAKEDRILL_PROPERTY_SEED=${2:-$(date +%s)}
echo "== property run: $LAKEDRILL_PROPERTY_CASES histories, seed $LAKEDRILL_PROPERTY_SEED"
exec cargo test --lib closure::tests::no_candidate_object_is_reachable -- --nocapture
