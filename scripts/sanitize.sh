#!/usr/bin/env bash
# Builds the torch-free core (csrc/pjrt, csrc/hlo, csrc/runtime) and its GoogleTests twice,
# with AddressSanitizer + UndefinedBehaviorSanitizer and with ThreadSanitizer, runs the
# tests under each, and exits non-zero if a test fails or a sanitizer reports anything.
#
#   scripts/sanitize.sh            # asan and tsan
#   scripts/sanitize.sh asan       # or: tsan, extension
#
# `extension` builds the PyTorch extension itself under ASan+UBSan (beside a copy of the
# package in $TORCH_TPU_SANITIZE_DIR/package, so the normal build stays) and runs Python on
# it: the smoke set of scripts/accelerator_smoke.py (ops, views, RNG, the GPT example in every
# mode, memory, out-of-memory, a bad index) with the XLA:CPU shortcuts on and off, and a
# start-up through the stand-in "cuda" plugin (tests/cpp/fake_plugin.h, API 0.115), and a
# slice of the pytest suite (copies, views, autograd, eager modes, memory, errors). Python and torch are not instrumented: libasan is preloaded and leak
# checking is off (an interpreter keeps its objects to the end).
#
# Environment: TORCH_TPU_SANITIZE_DIR (build trees and logs; default build-sanitize/, under
# .gitignore's build*/), JOBS (parallel compile jobs, default 2), GTEST_FILTER (a subset).
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

# run_python NAME ARGS...: python under the ASan build of the extension, log in $out/NAME.log.
run_python() {
  local name=$1 log="$out/$1.log" status=0
  shift
  echo "== run: $name (log: $log)"
  # libstdc++ preloaded with libasan: Python does not link it, and ASan's __cxa_throw
  # interceptor finds no real __cxa_throw (a CHECK failure at the first C++ throw) unless
  # libstdc++ is there when ASan starts.
  PYTHONPATH="$out/package" TORCH_TPU_AUTOLOAD=0 LD_PRELOAD="$libasan:$libstdcxx" \
    ASAN_OPTIONS="halt_on_error=1:exitcode=23:detect_leaks=0:verify_asan_link_order=0" \
    UBSAN_OPTIONS="halt_on_error=1:exitcode=24:print_stacktrace=1" \
    "${PYTHON:-python3}" "$@" >"$log" 2>&1 || status=$?
  tail -2 "$log"
  if [ "$status" -ne 0 ] || grep -qE "$report_pattern" "$log"; then
    echo "!! $name: exit status $status" >&2
    grep -E -A30 "$report_pattern" "$log" | head -80 >&2 || tail -20 "$log" >&2
    return 1
  fi
  echo "== $name: clean"
}

extension() {
  local flags="-fsanitize=address,undefined -fno-sanitize-recover=all -O1 -g -fno-omit-frame-pointer"
  local failed=0 fake="$out/build-extension/libtpu_test_fake_plugin.so"
  libasan=$(${CXX:-g++} -print-file-name=libasan.so)
  libstdcxx=$(${CXX:-g++} -print-file-name=libstdc++.so.6)
  rm -rf "$out/package" && mkdir -p "$out/package"
  # tests/ and examples/ beside the package, so the tests' conftest puts this package first
  (cd "$repo" && tar --exclude='_C*.so' --exclude=__pycache__ -cf - torch_tpu tests examples) |
    tar -xf - -C "$out/package"
  echo "== configure and build: extension ($flags)"
  cmake -S "$repo" -B "$out/build-extension" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DPython3_EXECUTABLE="$(command -v "${PYTHON:-python3}")" -DTORCH_TPU_BUILD_TESTS=ON \
    -DTORCH_TPU_EXTENSION_DIR="$out/package/torch_tpu" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_SHARED_LINKER_FLAGS="$flags" -DCMAKE_MODULE_LINKER_FLAGS="$flags" >/dev/null
  cmake --build "$out/build-extension" -j "$jobs" --target _C tpu_test_fake_plugin
  run_python extension-smoke "$repo/scripts/accelerator_smoke.py" || failed=1
  TORCH_TPU_XLA_CPU_SHORTCUTS=0 run_python extension-smoke-no-shortcuts \
    "$repo/scripts/accelerator_smoke.py" || failed=1
  TORCH_TPU_PJRT_PLUGIN="$fake" TORCH_TPU_FAKE_PJRT_PLATFORM=cuda TORCH_TPU_FAKE_PJRT_MINOR=115 \
    TORCH_TPU_FAKE_PJRT_TABLE_SIZE=1144 run_python extension-fake-cuda-start-up \
    "$repo/scripts/accelerator_smoke.py" --only ops_match_the_cpu,views_share_storage_like_the_cpu,memory_api_agrees_with_allocations || failed=1
  # A slice of the suite: copies, views, autograd, the eager modes, memory, errors.
  local files=()
  for name in test_copy test_views test_autograd test_eager_modes test_memory test_errors; do
    files+=("$out/package/tests/$name.py")
  done
  # (less the test that caps the address space: ASan's shadow memory needs terabytes of it)
  run_python extension-pytest -m pytest -q -p no:cacheprovider -x "${files[@]}" \
    -k "not test_plugin_out_of_memory_becomes_torch_out_of_memory" || failed=1
  return $failed
}

kinds=("$@")
[ ${#kinds[@]} -eq 0 ] && kinds=(asan tsan)
failed=0
for kind in "${kinds[@]}"; do
  case $kind in
    asan | tsan | extension) "$kind" || failed=1 ;;
    *) echo "unknown sanitizer '$kind': expected asan, tsan or extension" >&2; exit 2 ;;
  esac
done
exit $failed
