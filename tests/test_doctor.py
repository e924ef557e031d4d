"""python -m torch_tpu.doctor reports the setup and passes its self-test here."""

import os
import subprocess
import sys


def test_doctor_reports_a_working_installation():
    result = subprocess.run(
        [sys.executable, "-m", "torch_tpu.doctor"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for line in ("PJRT plugin:", "PJRT C API:", "eager mode:", "CPU fallback:", "self-test:"):
        assert line in result.stdout
    assert f"compile cache:   {os.environ['TORCH_TPU_CACHE_DIR']} (" in result.stdout
    assert "The installation works." in result.stdout
    assert "FAIL" not in result.stdout
