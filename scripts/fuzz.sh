#!/usr/bin/env bash
# Fuzzing: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 60 s, every target in fuzz/)
#
# Runs each cargo-fuzz target (libFuzzer with AddressSanitizer; needs a nightly toolchain, installed with
# `rustup toolchain install nightly` when missing, and cargo-fuzz, installed with `cargo install cargo-fuzz`)
# for a bounded time, starting from the seeds committed in fuzz/seeds/<target>/ (real metadata, manifest
# lists, manifests, policies, envelopes, report and bundle statements, decisions). The working corpus goes
# to target/fuzz-corpus/<target>/. Any crash, panic, leak or timeout fails the run (exit 1) and names the
# reproducer under fuzz/artifacts/<target>/; turn it into a regression test before fixing it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SECS=${1:-60}
[[ $# -gt 0 ]] && shift
die() { echo "scripts/fuzz.sh: $*" >&2; exit 2; }

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal \
  || die "cannot install a nightly toolchain (cargo-fuzz needs one)"
if ! command -v cargo-fuzz >/dev/null; then
  cargo install cargo-fuzz --locked || die "cannot install cargo-fuzz"
  export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi

TARGETS=("$@")
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  mapfile -t TARGETS < <(cargo +nightly fuzz list)
fi
failed=()
for t in "${TARGETS[@]}"; do
  corpus=target/fuzz-corpus/$t
  mkdir -p "$corpus"
  echo "== fuzz $t for ${SECS}s"
  if ! cargo +nightly fuzz run -O "$t" "$corpus" "fuzz/seeds/$t" -- \
      -max_total_time="$SECS" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1; then
    failed+=("$t")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "scripts/fuzz.sh: crashes in: ${failed[*]} (reproducers under fuzz/artifacts/)" >&2
  exit 1
fi
echo "== fuzz: ${#TARGETS[@]} targets, ${SECS}s each, no crash"
