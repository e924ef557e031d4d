#!/usr/bin/env bash
# Builds the torch-free core (csrc/pjrt, csrc/hlo, csrc/runtime) and its GoogleTests twice,
# with AddressSanitizer + UndefinedBehaviorSanitizer and with ThreadSanitizer, runs the
# tests under each, and exits non-zero if a test fails or a sanitizer reports anything.
#
#   scripts/sanitize.sh            # both
#   scripts/sanitize.sh asan       # or: tsan
#
# Environment: TORCH_TPU_SANITIZE_DIR (build trees and logs; default build-sanitize/, under
# .gitignore's build*/), JOBS (parallel compile jobs, default 2), GTEST_FILTER (a subset).
# The PyTorch extension is not built here (TORCH_TPU_BUILD_EXTENSION=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=${TORCH_TPU_SANITIZE_DIR:-$repo/build-sanitize}
jobs=${JOBS:-2}
mkdir -p "$out"

# Words that begin every report of these sanitizers. The exit codes below already fail the
# run; the log is scanned too, for reports from a child process (gtest death tests).
report_pattern='ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|WARNING: ThreadSanitizer|ERROR: ThreadSanitizer'

# configure_and_build NAME FLAGS: a Ninja tree in $out/build-NAME with FLAGS on every
# compile and link; -O1 -g and frame pointers give reports with whole stacks.
configure_and_build() {
  local name=$1 flags="$2 -O1 -g -fno-omit-frame-pointer"
  echo "== configure and build: $name ($flags)"
  cmake -S "$repo" -B "$out/build-$name" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DTORCH_TPU_BUILD_EXTENSION=OFF -DTORCH_TPU_BUILD_TESTS=ON \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
    -DCMAKE_SHARED_LINKER_FLAGS="$flags" -DCMAKE_MODULE_LINKER_FLAGS="$flags" >/dev/null
  cmake --build "$out/build-$name" -j "$jobs" --target tpu_core_tests
}

# run_tests NAME: the GoogleTests of $out/build-NAME, their output in $out/NAME.log.
run_tests() {
  local name=$1 log="$out/$1.log" status=0
  echo "== run: $name (log: $log)"
  "$out/build-$name/tpu_core_tests" --gtest_brief=1 ${GTEST_FILTER:+--gtest_filter="$GTEST_FILTER"} \
    >"$log" 2>&1 || status=$?
  grep -E '^\[  (PASSED|FAILED) ' "$log" || true
  if [ "$status" -ne 0 ]; then
    echo "!! $name: tpu_core_tests exited with $status" >&2
    grep -E -A30 "$report_pattern|^\[  FAILED  \]" "$log" | head -80 >&2 || true
    return 1
  fi
  if grep -qE "$report_pattern" "$log"; then
    echo "!! $name: a sanitizer report (see $log)" >&2
    grep -E -A30 "$report_pattern" "$log" | head -80 >&2
    return 1
  fi
  echo "== $name: clean"
}

asan() {
  configure_and_build asan "-fsanitize=address,undefined -fno-sanitize-recover=all"
  # halt_on_error + a distinct exit code: the first report ends the run as a failure.
  # detect_leaks: LeakSanitizer runs at exit (objects kept for the process are reachable).
  ASAN_OPTIONS="halt_on_error=1:exitcode=23:detect_leaks=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1" \
  UBSAN_OPTIONS="halt_on_error=1:exitcode=24:print_stacktrace=1" \
  LSAN_OPTIONS="suppressions=$repo/scripts/lsan.supp:print_suppressions=0" \
    run_tests asan
}

tsan() {
  configure_and_build tsan "-fsanitize=thread"
  # scripts/tsan.supp says why reports from inside the plugin are suppressed.
  TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:suppressions=$repo/scripts/tsan.supp:print_suppressions=0" \
    run_tests tsan
}

kinds=("$@")
[ ${#kinds[@]} -eq 0 ] && kinds=(asan tsan)
failed=0
for kind in "${kinds[@]}"; do
  case $kind in
    asan | tsan) "$kind" || failed=1 ;;
    *) echo "unknown sanitizer '$kind': expected asan or tsan" >&2; exit 2 ;;
  esac
done
exit $failed
