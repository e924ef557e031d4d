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

echo "== Python tests (pytest)"
"$PYTHON" -m pytest tests -q -p no:cacheprovider "$@"

echo "== accelerator path: a slice of the suite with TORCH_TPU_XLA_CPU_SHORTCUTS=0"
bash scripts/test_accelerator_path.sh
