#!/usr/bin/env bash
# Fuzz accel with cargo-fuzz (libFuzzer + AddressSanitizer), every target for a bounded time.
#
#   scripts/fuzz.sh short      a fixed number of runs per target from seed 1: the same inputs
#                              on every run of the same code (the test command's run, so CI
#                              repeats what passed here instead of drawing new inputs)
#   scripts/fuzz.sh 20         20 s per target, new inputs each time
#   scripts/fuzz.sh 600        the long run
#   FUZZ_TARGETS="device_name tensor_views" scripts/fuzz.sh 60
#
# Each target starts from its kept corpus in fuzz/corpus/NAME; new inputs go to a scratch
# folder, or into the kept corpus with FUZZ_KEEP=1 (prune with `cargo fuzz cmin NAME` before
# committing). Crashes are written to
# fuzz/artifacts/NAME/. Exits non-zero when any target crashed (or failed to build).
set -uo pipefail

SECONDS_PER_TARGET="${1:-20}"
# Runs per target in `short` mode: about 5-10 s of CPU each here (halved on 2026-12-05 for
# the test command's time; the long run is `scripts/fuzz.sh 600`).
declare -A SHORT_RUNS=([device_name]=100000 [tensor_construct]=500 [tensor_views]=15000 [hlo_text]=30000)
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT/fuzz"

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: needs a nightly toolchain (rustup toolchain install nightly)" >&2
    exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo +nightly install cargo-fuzz --locked || exit 2
fi

# target:extra cargo-fuzz flags. hlo_text needs accel's xla backend code (no extra deps); the
# others are built with it too, so that accelkit compiles once under ASan, not twice (the
# flags are part of a build's identity). Nothing they call probes for a PJRT plugin.
ALL="device_name:--features=hlo tensor_construct:--features=hlo tensor_views:--features=hlo hlo_text:--features=hlo"
TARGETS="${FUZZ_TARGETS:-$(for t in $ALL; do printf '%s ' "${t%%:*}"; done)}"

flags_of() {
    for t in $ALL; do
        [ "${t%%:*}" = "$1" ] && { printf '%s' "${t#*:}" | tr ',' ' '; return; }
    done
}

# The fuzz crate's lock file is committed and current: a build that would change it fails
# here (cargo-fuzz has no --locked), so every run builds the same versions.
if ! cargo +nightly metadata --locked --format-version 1 > /dev/null; then
    echo "fuzz.sh: fuzz/Cargo.lock is not current: run (cd fuzz && cargo +nightly update -w) and commit it" >&2
    exit 1
fi

failed=0
# Every target is built first; then each runs, FUZZ_JOBS at a time (default 1; the test
# command runs two, one per core, after the suites). Each run's lines go to a file of its own
# and are shown in the targets' order.
built=""
summary=""
for name in $TARGETS; do
    flags="$(flags_of "$name")"
    mkdir -p "corpus/$name" "artifacts/$name"
    log="$(mktemp)"
    echo "== $name: building (ASan)"
    # shellcheck disable=SC2086
    if ! cargo +nightly fuzz build -s address $flags "$name" >"$log" 2>&1; then
        tail -30 "$log"
        summary+="$(printf '%-18s BUILD FAILED' "$name")"$'\n'
        failed=1
    else
        built+="$name "
    fi
    rm -f "$log"
done
# FUZZ_BUILD_ONLY=1: build every target and stop (the test command builds them beside its
# suites; the run that follows finds them built).
if [ "${FUZZ_BUILD_ONLY:-0}" = 1 ]; then
    printf '%s' "$summary"
    exit $failed
fi

# One target's run: its report lines into $out/NAME.lines, its summary row into $out/NAME.row,
# the fuzzer's exit status into $out/NAME.rc.
run_one() {
    local name=$1 out=$2 flags limit dirs scratch="" log start rc secs execs verdict artifact
    flags="$(flags_of "$name")"
    log="$out/$name.log"
    if [ "$SECONDS_PER_TARGET" = short ]; then
        limit=(-runs="${SHORT_RUNS[$name]}" -seed=1)
        echo "== $name: ${SHORT_RUNS[$name]} runs from seed 1" > "$out/$name.lines"
    else
        limit=(-max_total_time="$SECONDS_PER_TARGET")
        echo "== $name: fuzzing for ${SECONDS_PER_TARGET}s" > "$out/$name.lines"
    fi
    start=$(date +%s)
    # New inputs go to a scratch folder unless FUZZ_KEEP=1 (then into the kept corpus, to
    # be pruned with `cargo fuzz cmin` before committing); the kept corpus is read as seeds.
    if [ "${FUZZ_KEEP:-0}" = 1 ]; then
        dirs=("corpus/$name")
    else
        scratch="$(mktemp -d)"
        dirs=("$scratch" "corpus/$name")
    fi
    # shellcheck disable=SC2086
    cargo +nightly fuzz run -s address $flags "$name" "${dirs[@]}" -- \
        "${limit[@]}" -rss_limit_mb=4096 -timeout=30 \
        -print_final_stats=1 >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    execs="$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)"
    [ -z "$execs" ] && execs="$(grep -Eo '^#[0-9]+' "$log" | tail -1 | tr -d '#')"
    if [ $rc -eq 0 ]; then
        verdict="no crash"
    else
        artifact="$(grep -Eo 'Test unit written to [^ ]+' "$log" | tail -1 | sed 's/Test unit written to //')"
        verdict="CRASH (exit $rc) ${artifact:-see log}"
        grep -E -m1 -A1 'panicked at|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)' "$log" \
            | sed 's/^/    /' >> "$out/$name.lines"
        echo "    reproduce: (cd fuzz && cargo +nightly fuzz run $flags $name ${artifact:-ARTIFACT})" \
            >> "$out/$name.lines"
    fi
    printf '%-18s %10s execs %5ss  %s\n' "$name" "${execs:-?}" "$secs" "$verdict" > "$out/$name.row"
    [ -n "$scratch" ] && rm -rf "$scratch"
    echo "$rc" > "$out/$name.rc"
}

out="$(mktemp -d)"
jobs_max="${FUZZ_JOBS:-1}"
for name in $built; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
        wait -n
    done
    run_one "$name" "$out" &
done
wait
for name in $built; do
    cat "$out/$name.lines"
    summary+="$(cat "$out/$name.row")"$'\n'
    [ "$(cat "$out/$name.rc" 2>/dev/null)" = 0 ] || failed=1
done
rm -rf "$out"

echo
echo "target                  executions   time  result"
printf '%s' "$summary"
exit $failed
