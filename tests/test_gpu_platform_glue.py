"""The GPU plugin's start-up without a GPU: the client options torch_tpu passes it (what
JAX passes, with no preallocation by default so that torch.cuda keeps room), and a whole
start-up through a stand-in plugin (build/libtpu_test_fake_plugin.so, tests/cpp/
fake_plugin.h) that reports platform "cuda", PJRT API 0.115 and the GPU plugin's
1144-byte table while forwarding to the CPU plugin."""

import json
import os
import re

import pytest
from fresh_process import ROOT, run_python

from torch_tpu._runtime.plugin import client_options, gpu_client_options

FAKE_PLUGIN = os.path.join(
    os.environ.get("TORCH_TPU_BUILD_DIR", os.path.join(ROOT, "build")), "libtpu_test_fake_plugin.so"
)


def test_defaults_leave_the_gpu_to_torch_cuda():
    assert gpu_client_options({}) == [
        ("platform_name", "cuda"),
        ("allocator", "default"),
        ("preallocate", False),
    ]


def test_our_variables_and_jaxs_set_them():
    ours = gpu_client_options(
        {
            "TORCH_TPU_GPU_PREALLOCATE": "1",
            "TORCH_TPU_GPU_MEMORY_FRACTION": "0.9",
            "TORCH_TPU_GPU_ALLOCATOR": "BFC",
            "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.2",  # ours wins
        }
    )
    assert dict(ours) == {
        "platform_name": "cuda",
        "allocator": "bfc",
        "preallocate": True,
        "memory_fraction": 0.9,
    }
    jaxs = gpu_client_options(
        {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_CLIENT_MEM_FRACTION": ".3"}
    )
    assert dict(jaxs)["preallocate"] is False and dict(jaxs)["memory_fraction"] == 0.3


@pytest.mark.parametrize(
    "env, message",
    [
        ({"TORCH_TPU_GPU_MEMORY_FRACTION": "1.5"}, "TORCH_TPU_GPU_MEMORY_FRACTION='1.5'"),
        ({"TORCH_TPU_GPU_MEMORY_FRACTION": "half"}, "share of the GPU's memory"),
        ({"XLA_PYTHON_CLIENT_MEM_FRACTION": "0"}, "XLA_PYTHON_CLIENT_MEM_FRACTION='0'"),
        ({"TORCH_TPU_GPU_PREALLOCATE": "maybe"}, "expected 0 or 1"),
        ({"TORCH_TPU_GPU_ALLOCATOR": "pooled"}, "default, platform, bfc, cuda_async"),
    ],
)
def test_bad_settings_are_refused_by_name(env, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        gpu_client_options(env)


def test_other_platforms_get_none_of_them():
    assert client_options("tpu") == []


START_UP = r"""
import ctypes, json, os, torch, torch_tpu
x = torch.arange(6.0, device="tpu").reshape(2, 3)
product = (x @ x.T).cpu().tolist()
y = x.t().contiguous().view(-1)  # views and copies without the CPU plugin's raw pointers
y.add_(1)
info = torch_tpu._C._plugin_info()
print(json.dumps({"product": product, "y": y.cpu().tolist(), "platform": info["platform_name"],
                  "api": info["api_version"], "shortcuts": info["xla_cpu_shortcuts"],
                  "device": torch.tpu.get_device_properties(0).platform}))
"""


def test_start_up_as_the_gpu_plugin_passes_the_options():
    if not os.path.isfile(FAKE_PLUGIN):
        pytest.skip(f"{FAKE_PLUGIN} is built with the C++ tests (scripts/setup.sh --test)")
    result = run_python(
        START_UP,
        timeout=120,
        TORCH_TPU_PJRT_PLUGIN=FAKE_PLUGIN,
        TORCH_TPU_PLATFORM="cuda",
        TORCH_TPU_FAKE_PJRT_PLATFORM="cuda",
        TORCH_TPU_FAKE_PJRT_MINOR="115",
        TORCH_TPU_FAKE_PJRT_TABLE_SIZE="1144",
        TORCH_TPU_GPU_MEMORY_FRACTION="0.5",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["product"] == [[5.0, 14.0], [14.0, 50.0]]
    assert report["y"] == [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    assert report["platform"] == "cuda" and report["device"] == "cuda"
    assert report["api"].endswith(".115")
    assert report["shortcuts"] is False  # no CPU-only path on another platform


def test_the_stand_in_saw_the_options():
    if not os.path.isfile(FAKE_PLUGIN):
        pytest.skip(f"{FAKE_PLUGIN} is built with the C++ tests (scripts/setup.sh --test)")
    # TorchTpuFakePlugin_Stats (tests/cpp/fake_plugin.h): the last create's options.
    code = f"""
import ctypes, torch_tpu
class Stats(ctypes.Structure):
    _fields_ = [("created", ctypes.c_int64), ("destroyed", ctypes.c_int64),
                ("options", ctypes.c_char_p)]
lib = ctypes.CDLL({FAKE_PLUGIN!r})
lib.TorchTpuFakePlugin_Stats.restype = Stats
print(lib.TorchTpuFakePlugin_Stats().options.decode())
"""
    result = run_python(
        code,
        timeout=120,
        TORCH_TPU_PJRT_PLUGIN=FAKE_PLUGIN,
        TORCH_TPU_PLATFORM="cuda",
        TORCH_TPU_FAKE_PJRT_PLATFORM="cuda",
        TORCH_TPU_GPU_MEMORY_FRACTION="0.5",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = result.stdout.split()
    for option in (
        "platform_name=string:cuda",
        "allocator=string:default",
        "preallocate=bool:false",
        "memory_fraction=float:0.5",
    ):
        assert option in seen, result.stdout
