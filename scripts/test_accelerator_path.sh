#!/usr/bin/env bash
# The accelerator-path slice of the suite: the same tests, on the CPU plugin, with every
# XLA:CPU-only shortcut turned off (TORCH_TPU_XLA_CPU_SHORTCUTS=0; the list and why each
# exists: csrc/runtime/xla_cpu_shortcuts.h), so what runs is the code a TPU or GPU runs:
# programs only, buffers moved by PJRT's transfer calls, default compile options.
# scripts/test.sh runs it after the main suite; scripts/accelerator_check.sh runs it on the
# accelerator itself. Extra arguments go to pytest. 4 to 9 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# The slice: ops and OpInfo, views, autograd, the three eager modes, compile, cache,
# kernels, copies and memory, distributed over the staging engine.
files=(
  tests/test_views.py
  tests/test_ops.py
  tests/test_autograd.py
  tests/test_eager_modes.py
  tests/test_defer_and_fuse.py
  tests/test_copy.py
  tests/test_memory.py
  tests/test_compile.py
  tests/test_cache.py
  tests/test_kernels.py
)
# OpInfo: every op, strict mode, forward and grad. On the CPU plugin float32 only: the dtype
# the host-kernel shortcuts serve, so the one whose programs change with them off. On an
# accelerator also bfloat16, the dtype it trains in.
opinfo="strict and float32"
if [ "${TORCH_TPU_PLATFORM:-cpu}" != cpu ]; then
  opinfo="strict and (float32 or bfloat16)"
fi
# Distributed: collectives and the parallel wrappers, one process per rank, strict mode.
distributed="test_collectives or test_bad_input or (strict and (ddp or fsdp2 or dtensor))"

export TORCH_TPU_XLA_CPU_SHORTCUTS=0
# Every program the slice compiles is dumped, then compiled for a TPU and a GPU below.
programs=$(mktemp -d "${TMPDIR:-/tmp}/torch_tpu_slice_programs.XXXXXX")
trap 'rm -rf "$programs"' EXIT
export TORCH_TPU_DUMP_PROGRAMS=$programs
"$PYTHON" -m pytest -q -p no:cacheprovider "${files[@]}" "$@"
"$PYTHON" -m pytest -q -p no:cacheprovider tests/test_opinfo.py -k "$opinfo" "$@"
"$PYTHON" -m pytest -q -p no:cacheprovider tests/test_distributed.py -k "$distributed" "$@"
unset TORCH_TPU_DUMP_PROGRAMS

# The compile half of the accelerator path: each distinct program of the slice compiled for a
# TPU v6e and an NVIDIA H100 (2x2 and 1x1x4: the distributed tests' collectives span 4 devices)
# by their own compilers (libtpu, the CUDA plugin), one process per core. Any refusal fails.
if [ "${TORCH_TPU_SKIP_TARGET_CHECK:-0}" != 1 ]; then
  echo "== accelerator path: the slice's programs compiled for v6e:2x2 and h100:1x1x4"
  "$PYTHON" -m torch_tpu.target_check --target v6e:2x2 --target h100:1x1x4 \
    --programs "$programs" --jobs "$(nproc)" --top 5
fi
