#!/usr/bin/env bash
# Compiles the PyTorch extension's C++ (every .cpp that includes torch headers) against another
# torch release's headers, without installing that torch: a break in torch's C++ API shows here
# before a GPU image or TPU VM with that torch meets it. Syntax and types only (-fsyntax-only):
# nothing is linked.
#
#   scripts/check_torch_headers.sh torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl
#   scripts/check_torch_headers.sh /path/to/site-packages/torch/include
#
# A wheel's include/ folder is unpacked into a temporary folder. Get a wheel without touching
# the installed torch: pip download --no-deps torch==2.11.0 -d /tmp/wheels
# Environment: JOBS (parallel compiles, default the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

if [ $# -ne 1 ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
source=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

case $source in
  *.whl)
    unzip -q "$source" 'torch/include/*' 'torch/version.py' -d "$scratch"
    include=$scratch/torch/include
    version=$(sed -n "s/^__version__ = '\(.*\)'/\1/p" "$scratch/torch/version.py")
    ;;
  *)
    include=$source
    version=$(sed -n "s/^__version__ = '\(.*\)'/\1/p" "$include/../version.py" 2>/dev/null || true)
    ;;
esac
if [ ! -f "$include/torch/extension.h" ]; then
  echo "check_torch_headers: no torch headers at $include (expected torch/extension.h there)" >&2
  exit 2
fi

python_include=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
pjrt_include=$(python3 -c "import os, xla_plugins.xla_cpu_pjrt as m; print(os.path.join(os.path.dirname(m.__file__), 'include'))")

# The extension's sources: everything CMake's _C target compiles (the torch-free core is
# checked by its own build and needs no torch).
mapfile -t sources < <(ls csrc/aten/*.cpp csrc/aten/ops/*.cpp csrc/distributed/*.cpp \
  csrc/host_kernels/*.cpp csrc/kernels/*.cpp csrc/python/*.cpp 2>/dev/null)

# The flags of CMake's _C target (defines as torch's CMake config sets them for a build with
# distributed and gloo), with the other torch's include folders in place of the installed one.
flags=(-std=gnu++17 -fsyntax-only -DTORCH_EXTENSION_NAME=_C -DUSE_C10D_GLOO -DUSE_DISTRIBUTED
  -DUSE_RPC -DUSE_TENSORPIPE -I"$repo/csrc" -I"$repo/csrc/pjrt" -I"$repo/csrc/hlo"
  -I"$pjrt_include" -isystem "$python_include" -isystem "$include"
  -isystem "$include/torch/csrc/api/include")

echo "torch ${version:-(version unknown)} headers at $include: ${#sources[@]} files"
log=$scratch/errors
printf '%s\n' "${sources[@]}" |
  xargs -P "${JOBS:-$(nproc)}" -I{} sh -c 'c++ "$@" {} 2>>"'"$log"'" || echo "FAILED {}"' _ "${flags[@]}" |
  tee "$scratch/failed"
if [ -s "$scratch/failed" ]; then
  grep -E "error" "$log" | head -40 >&2
  echo "check_torch_headers: $(wc -l <"$scratch/failed") of ${#sources[@]} files do not compile against torch ${version}" >&2
  exit 1
fi
echo "check_torch_headers: all ${#sources[@]} files compile against torch ${version}"
