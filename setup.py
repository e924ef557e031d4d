"""Builds torch_tpu's C++ core and its PyTorch extension with CMake + Ninja.

Install with the already-installed torch (never a fresh one from PyPI):
    pip install --no-build-isolation -e .
"""

import os
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name: str):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        build_dir = os.environ.get("TORCH_TPU_BUILD_DIR", os.path.join(ROOT, "build"))
        subprocess.check_call(
            [
                "cmake",
                "-S",
                ROOT,
                "-B",
                build_dir,
                "-G",
                "Ninja",
                f"-DPython3_EXECUTABLE={sys.executable}",
                f"-DCMAKE_BUILD_TYPE={os.environ.get('TORCH_TPU_BUILD_TYPE', 'Release')}",
            ]
        )
        subprocess.check_call(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 2)])
        # CMake writes the module into torch_tpu/; copy it where setuptools expects it.
        built = os.path.join(ROOT, "torch_tpu", os.path.basename(self.get_ext_filename(ext.name)))
        target = self.get_ext_fullpath(ext.name)
        if os.path.abspath(built) != os.path.abspath(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(built, target)
            # The torch version CMake recorded beside the module (checked at import).
            record = os.path.join(ROOT, "torch_tpu", "_C.torch_version")
            shutil.copyfile(record, os.path.join(os.path.dirname(target), "_C.torch_version"))


setup(
    # The distribution's name: PyPI's "torch-tpu" (and "torch_tpu", the same name once
    # normalized) is Google's TorchTPU, so `pip install torch-tpu` would fetch theirs. The
    # import name stays torch_tpu, so TorchTPU code runs here unchanged.
    name="torch-pjrt",
    version="0.1.0",
    description="A native PyTorch backend for TPUs through the PJRT C API",
    packages=find_packages(include=["torch_tpu", "torch_tpu.*"]),
    py_modules=["_torch_tpu_autoload"],
    ext_modules=[CMakeExtension("torch_tpu._C")],
    cmdclass={"build_ext": CMakeBuild},
    # torch 2.11-2.13 build (torch_tpu/_runtime/versions.py); scripts/setup.sh installs 2.13.0.
    install_requires=["torch>=2.11,<2.14", "xla-cpu-pjrt==0.0.1", "numpy"],
    # torch_tpu.kernels.jax_op: the newest JAX for Python 3.11 (0.12 and Tokamax need 3.12).
    extras_require={"jax": ["jax==0.10.2", "jaxlib==0.10.2"]},
    python_requires=">=3.10",
    # PyTorch imports this with torch itself, so programs that never name torch_tpu
    # (torchrun -m torchtitan.train, PyTorch's device tests) find the tpu device.
    entry_points={
        "torch.backends": ["torch_tpu = _torch_tpu_autoload:load"],
        # vLLM finds the tpu platform here (torch_tpu/serving); see scripts/setup.sh --vllm.
        "vllm.platform_plugins": ["tpu = torch_tpu.serving:register"],
    },
)
