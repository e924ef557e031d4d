#!/usr/bin/env bash
# Runs the whole test suite: the C++ core's GoogleTest tests, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
build_dir=${TORCH_TPU_BUILD_DIR:-build}

echo "== C++ tests: csrc/pjrt, csrc/hlo, csrc/runtime (GoogleTest)"
"$build_dir/tpu_core_tests" --gtest_brief=1

echo "== lint (ruff)"
"$PYTHON" -m ruff check torch_tpu tests examples setup.py _torch_tpu_autoload.py

echo "== Python tests (pytest)"
"$PYTHON" -m pytest tests -q -p no:cacheprovider "$@"
