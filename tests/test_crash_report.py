"""A fatal signal on a thread that is not Python's main one (as a PJRT plugin's threads
are) is reported with that thread's native stack, and then handed on: Python's
faulthandler still prints its report and the process still dies of the signal."""

import signal

from fresh_process import run_python

CRASH_ON_A_WORKER = """
import faulthandler
faulthandler.enable()  # before torch_tpu, as `python -X faulthandler` and pytest do
import ctypes, threading, torch, torch_tpu
(torch.ones(3, device="tpu") + 1).cpu()
worker = threading.Thread(target=lambda: ctypes.string_at(0))
worker.start()
worker.join()
print("not reached")
"""


def test_a_fault_on_another_thread_shows_its_native_stack_then_python_reports_it():
    run = run_python(CRASH_ON_A_WORKER, timeout=120)
    assert run.returncode == -signal.SIGSEGV, (run.returncode, run.stderr[-2000:])
    assert "not reached" not in run.stdout
    report = run.stderr
    assert "torch_tpu: fatal SIGSEGV at address 0x0 in thread " in report
    assert "(not the main thread); its native stack:" in report
    frames = report.split("its native stack:\n", 1)[1].split("torch_tpu: end of the native stack")[
        0
    ]
    assert "_ctypes" in frames and "libffi" in frames  # the worker's own frames
    # faulthandler ran after ours, on the same thread
    assert report.index("end of the native stack") < report.index("Fatal Python error")
    assert "in <lambda>" in report


def test_faulthandler_enabled_after_torch_tpu_still_hands_the_signal_on_to_the_report():
    code = CRASH_ON_A_WORKER.replace("faulthandler.enable()", "").replace(
        "(torch.ones(3", "faulthandler.enable()\n(torch.ones(3"
    )
    run = run_python(code, timeout=120)
    assert run.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in run.stderr
    assert "(not the main thread); its native stack:" in run.stderr


def test_the_report_can_be_turned_off_and_a_bad_value_is_named():
    run = run_python(CRASH_ON_A_WORKER, timeout=120, TORCH_TPU_CRASH_REPORT="0")
    assert run.returncode == -signal.SIGSEGV
    assert "torch_tpu: fatal" not in run.stderr
    assert "Fatal Python error: Segmentation fault" in run.stderr
    run = run_python("import torch_tpu", timeout=120, TORCH_TPU_CRASH_REPORT="yes")
    assert run.returncode != 0
    assert "TORCH_TPU_CRASH_REPORT" in run.stderr and "'yes'" in run.stderr
