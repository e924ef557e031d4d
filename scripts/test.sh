#!/usr/bin/env bash
# Runs the whole test suite: the C++ core's GoogleTest tests, then pytest, then the
# accelerator-path slice (the same tests with every XLA:CPU-only shortcut off).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
build_dir=${TORCH_TPU_BUILD_DIR:-build}

echo "== C++ tests: csrc/pjrt, csrc/hlo, csrc/runtime (GoogleTest)"
"$build_dir/tpu_core_tests" --gtest_brief=1

echo "== lint (ruff)"
"$PYTHON" -m ruff check torch_tpu tests examples bench scripts setup.py _torch_tpu_autoload.py

# One pytest worker per core (pytest-xdist, from setup.sh --test): the suite is mostly
# compiles, each on one core. TEST_WORKERS=0 runs it in this process instead.
workers=${TEST_WORKERS:-$(nproc)}
parallel=()
if [ "$workers" != 0 ] && "$PYTHON" -c "import xdist" 2>/dev/null; then
  parallel=(-n "$workers")
fi

echo "== Python tests (pytest${parallel[*]:+, ${parallel[*]}})"
"$PYTHON" -m pytest tests -q -p no:cacheprovider "${parallel[@]}" "$@"

echo "== accelerator path: a slice of the suite with TORCH_TPU_XLA_CPU_SHORTCUTS=0"
bash scripts/test_accelerator_path.sh "${parallel[@]}"
