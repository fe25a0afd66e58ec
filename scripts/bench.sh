#!/usr/bin/env bash
# Seal and restore throughput next to b3sum: scripts/bench.sh [extra cargo bench args...]
#
# 1. installs b3sum (the reference implementation of BLAKE3's CLI) with `cargo install b3sum --locked`
#    when it is not on PATH;
# 2. runs `cargo bench --bench throughput` (release profile), which writes LAKEDRILL_BENCH_FILES files
#    (default 64) of LAKEDRILL_BENCH_FILE_MIB MiB (default 16) under a fresh temporary folder, and
#    prints b3sum, seal and restore-verify throughput with a PASS/FAIL verdict against 0.9x b3sum.
# The benchmark exits 0 whatever the verdict (it is a measurement); 2 when it could not measure.
# Set TMPDIR to put the data elsewhere (no path component may start with ".").
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v b3sum >/dev/null; then
  echo "== installing b3sum (cargo install b3sum --locked)"
  cargo install b3sum --locked
  # cargo installs into $CARGO_HOME/bin, which may not be on PATH yet in this shell.
  export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
  command -v b3sum >/dev/null || { echo "scripts/bench.sh: b3sum still not on PATH" >&2; exit 2; }
fi

exec cargo bench --bench throughput "$@"
