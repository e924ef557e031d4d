#!/usr/bin/env bash
# The device check: on a GPU or TPU machine (or any machine), in one command,
#   bash scripts/accelerator_check.sh
# builds torch_tpu against the machine's own torch and PJRT plugin, then runs
#   1. import, several times in fresh processes (a crash at start-up that depends on
#      timing shows as a signal in some of them);
#   2. the smoke set (scripts/accelerator_smoke.py): ops, float32 matmul precision, views,
#      RNG, the GPT example in strict, debug, defer_and_fuse and compiled, memory API,
#      out-of-memory, a bad index, each against PyTorch on the CPU;
#   3. bench/accelerator.py: a Llama-style bf16 training step, torch_tpu against PyTorch's
#      own eager and Inductor on the same device, each variant in its own process;
#   4. the accelerator-path slice of the suite, in the time that is left.
# Every stage runs whatever the one before did, and the summary lists each one's status
# (a signal by name). Aim: under 9 minutes on a 16-core GPU machine.
#
# Environment: TORCH_TPU_PLATFORM (default: cuda where nvidia-smi sees a GPU, tpu where
# /dev/accel* or /dev/vfio exist, else cpu); PJRT_INCLUDE_DIR, the folder of pjrt_c_api.h
# where the xla-cpu-pjrt wheel is not installed; CHECK_BUDGET_S (default 520), the seconds
# the whole check may take (the slice gets what is left); BENCH_ARGS, extra arguments for
# the benchmark (e.g. "--size tiny" or "--layers 4"); IMPORT_RUNS (default 5).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
budget=${CHECK_BUDGET_S:-520}
started=$SECONDS
build_dir=${TORCH_TPU_BUILD_DIR:-build-check}
summary=()

if [ -z "${TORCH_TPU_PLATFORM:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    export TORCH_TPU_PLATFORM=cuda
  elif compgen -G "/dev/accel*" >/dev/null || [ -e /dev/vfio ]; then
    export TORCH_TPU_PLATFORM=tpu
  else
    export TORCH_TPU_PLATFORM=cpu
  fi
fi

# status of the last command in words: "ok", "exit 3", "killed by SIGSEGV", "timed out"
describe() {
  local rc=$1
  if [ "$rc" -eq 0 ]; then echo ok
  elif [ "$rc" -eq 124 ]; then echo "timed out"
  elif [ "$rc" -gt 128 ]; then echo "killed by SIG$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128)))"
  else echo "exit $rc"
  fi
}

stage() {  # stage NAME COMMAND...: runs it, unpiped so its exit status is its own
  local name=$1 start=$SECONDS rc
  shift
  echo
  echo "== $name (at $((SECONDS - started)) s)"
  "$@"
  rc=$?
  summary+=("$(printf '%-10s %-22s %5d s' "$name" "$(describe $rc)" $((SECONDS - start)))")
  return $rc
}

echo "== machine: $(nproc) cores, platform $TORCH_TPU_PLATFORM, $("$PYTHON" --version 2>&1)," \
  "torch $("$PYTHON" -c 'import os; os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"]="0"; import torch; print(torch.__version__)')"
[ "$TORCH_TPU_PLATFORM" = cuda ] && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

build() {
  local prefix
  prefix=$(TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPython3_EXECUTABLE="$(command -v "$PYTHON")" -DCMAKE_PREFIX_PATH="$prefix" \
    -DTORCH_TPU_BUILD_TESTS=OFF ${PJRT_INCLUDE_DIR:+-DPJRT_INCLUDE_DIR="$PJRT_INCLUDE_DIR"} \
    >"$build_dir/build.log" 2>&1 && cmake --build "$build_dir" -j "$(nproc)" >>"$build_dir/build.log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && tail -40 "$build_dir/build.log"
  return $rc
}
mkdir -p "$build_dir"
if ! stage build build; then
  printf '%s\n' "${summary[@]}"
  exit 1
fi
# The repository on the path, as an editable install would put it.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

imports() {
  local failed=0 rc
  for run in $(seq "${IMPORT_RUNS:-5}"); do
    timeout 120 "$PYTHON" -X faulthandler -c "
import torch, torch_tpu
info = torch_tpu._C._plugin_info()
x = torch.arange(6.0, device='tpu')
assert (x * 2).sum().item() == 30.0
print('import $run:', info['platform_name'], 'plugin, PJRT API', info['api_version'] + ',',
      torch.tpu.device_count(), 'device(s):', torch.tpu.get_device_name(0))
"
    rc=$?
    if [ $rc -ne 0 ]; then
      echo "import $run: $(describe $rc)"
      failed=$((failed + 1))
    fi
  done
  echo "import: $failed of ${IMPORT_RUNS:-5} runs failed"
  return $((failed > 0))
}
stage import imports

stage smoke timeout 300 "$PYTHON" -X faulthandler scripts/accelerator_smoke.py

# shellcheck disable=SC2086  # BENCH_ARGS is a list of arguments
stage bench timeout 400 "$PYTHON" bench/accelerator.py --timeout 150 ${BENCH_ARGS:-}

left=$((budget - (SECONDS - started)))
[ $left -lt 60 ] && left=60
stage slice timeout "$left" bash scripts/test_accelerator_path.sh --maxfail=20

echo
echo "== summary ($((SECONDS - started)) s in all, platform $TORCH_TPU_PLATFORM)"
printf '%s\n' "${summary[@]}"
for line in "${summary[@]}"; do
  case "$line" in *" ok "*) ;; *) exit 1 ;; esac
done
