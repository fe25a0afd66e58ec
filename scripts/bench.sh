#!/usr/bin/env bash
# The benchmarks: scripts/bench.sh [throughput|scale ...]   (default: both)
#
# 1. installs what the baselines need when it is missing: b3sum (`cargo install b3sum --locked`),
#    restic and GNU time (Debian packages, apt-get), and the PyIceberg venv of the tests
#    (scripts/test.sh with LAKEDRILL_TEST_NO_CARGO=1, which stops before `cargo test`);
# 2. runs `cargo bench --bench throughput` (seal and restore vs b3sum, restore vs restic check
#    --read-data, over the same >= 1 GiB of data files; the weekly drill of 30 bundles vs b3sum) and
#    `cargo bench --bench scale` (plan vs PyIceberg inspect.all_files() on 1,000 snapshots x 100 files;
#    restore of 10,000 small objects behind 20 ms per request; plan, seal and restore at 100k, 300k and
#    1M files; purge on the local filesystem; purge on S3, SeaweedFS started from the venv). Each prints
#    its figures with the baseline measured in the same run, the ratio and the verdict against the target.
# The benchmarks exit 0 whatever the verdicts (they are measurements); 2 when they could not measure.
# Sizes are set by LAKEDRILL_BENCH_* variables (see the top of each file in benches/).
# Set TMPDIR to put the data elsewhere (no path component may start with ".").
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

BENCHES=("$@")
[[ ${#BENCHES[@]} -gt 0 ]] || BENCHES=(throughput scale)

if ! command -v b3sum >/dev/null; then
  echo "== installing b3sum (cargo install b3sum --locked)"
  cargo install b3sum --locked
  # cargo installs into $CARGO_HOME/bin, which may not be on PATH yet in this shell.
  export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
  command -v b3sum >/dev/null || { echo "scripts/bench.sh: b3sum still not on PATH" >&2; exit 2; }
fi

missing=()
command -v restic >/dev/null || missing+=(restic)
[[ -x /usr/bin/time ]] || missing+=(time)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "== installing ${missing[*]} (apt-get)"
  SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null \
    || { echo "scripts/bench.sh: cannot install ${missing[*]}" >&2; exit 2; }
fi

if [[ ! -x target/test-venv/bin/python ]]; then
  echo "== setting up the PyIceberg venv (scripts/test.sh without cargo)"
  LAKEDRILL_TEST_NO_CARGO=1 ./scripts/test.sh >/dev/null
fi
export LAKEDRILL_BENCH_PYTHON=${LAKEDRILL_BENCH_PYTHON:-$PWD/target/test-venv/bin/python}

for b in "${BENCHES[@]}"; do
  echo "== cargo bench --bench $b"
  cargo bench --bench "$b"
done
