"""python -m torch_tpu.module_sweep: the modules it names run natively, and a case whose
sample PyTorch's database built badly (it raises on the CPU too) is listed apart from
cases that fail only on tpu."""

import contextlib
import io

from torch_tpu import module_sweep


def sweep(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert module_sweep.main(list(args)) == 0
    return out.getvalue()


def test_fractional_pooling_runs_natively_and_bad_samples_are_the_cpus_too():
    report = sweep("--modules-only", "FractionalMaxPool2d", "FractionalMaxPool3d")
    assert "0 operators fell back to the CPU" in report
    assert "0 cases raised on tpu only" in report
    # ModuleInfo gives these float32 inputs float64 samples: the CPU refuses them as well
    cpu_part = report.split("raised on the CPU too")[1]
    assert (
        "FractionalMaxPool2d[0]: RuntimeError: Expect _random_samples to have the same dtype"
        in (cpu_part)
    )


def test_an_optimizer_sample_that_fails_everywhere_is_not_tpus():
    report = sweep("--optimizers-only", "SparseAdam", "Adam")
    assert "0 operators fell back to the CPU" in report
    assert "0 cases raised on tpu only" in report
    assert "SparseAdam[0]: RuntimeError: SparseAdam does not support dense gradients" in report
