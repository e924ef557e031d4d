"""Starting PyTorch's autograd device threads at import, not at the first backward().

With a device registered, the first backward() starts one autograd thread per
device, and each must take the GIL once to create its Python thread state. If the
interpreter starts shutting down before they have (a short script that calls
backward() and exits), those threads are killed while waiting for the GIL and the
process aborts with "terminate called without an active exception" (pytorch#38228,
#50893). So torch_tpu starts them during import and waits until every one of them
has its thread state. The same abort can hit a device thread still releasing the
last graph of a backward() when the script ends, so at exit the GIL is let go for a
moment, for that cleanup to finish first.
"""

from __future__ import annotations

import atexit
import ctypes
import time

import torch


def _python_thread_states() -> int:
    api = ctypes.pythonapi
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
    api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
    api.PyThreadState_Next.restype = ctypes.c_void_p
    api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
    count = 0
    state = api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
    while state:
        count += 1
        state = api.PyThreadState_Next(state)
    return count


def start(device_count: int, timeout: float = 10.0) -> None:
    before = _python_thread_states()
    torch.ones(1, requires_grad=True).sum().backward()  # a CPU backward starts them all
    deadline = time.monotonic() + timeout
    while _python_thread_states() < before + device_count and time.monotonic() < deadline:
        time.sleep(0.001)  # releases the GIL so the threads can initialise
    atexit.register(time.sleep, 0.05)
