"""torch.set_float32_matmul_precision on tpu: every float32 dot and convolution carries the
matching XLA precision_config (HIGHEST / HIGH / DEFAULT), read from the programs the process
compiled (TORCH_TPU_DUMP_PROGRAMS), with the CPU platform's host matmul kernels off;
TorchTPU's torch.tpu.Precision names set the same."""

import glob
import os

import pytest
import torch
import torch.nn.functional as F

import torch_tpu


@pytest.fixture(autouse=True)
def xla_dots():
    """XLA's own dot_general, which carries the precision: on the CPU platform float32
    products otherwise call the host matmul kernels (test_host_matmul.py)."""
    previous = torch_tpu._C._host_matmul_enabled()
    torch_tpu._C._set_host_matmul_enabled(False)
    yield
    torch_tpu._C._set_host_matmul_enabled(previous)


EXPECTED = {"highest": "precision HIGHEST", "high": "precision HIGH>", "medium": None}


@pytest.fixture
def dumped(tmp_path, monkeypatch):
    """The text of the programs loaded while the test runs, newest last."""
    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))

    def texts():
        return [open(p).read() for p in sorted(glob.glob(os.path.join(tmp_path, "*.mlir")))]

    previous = torch.get_float32_matmul_precision()
    yield texts
    torch.set_float32_matmul_precision(previous)


# Shapes seen nowhere else in the suite, so that each program is new to this process.
CASES = {
    "mm": lambda: torch.randn(3, 13, device="tpu") @ torch.randn(13, 7, device="tpu"),
    "bmm": lambda: torch.bmm(
        torch.randn(2, 3, 11, device="tpu"), torch.randn(2, 11, 5, device="tpu")
    ),
    "linear": lambda: F.linear(
        torch.randn(4, 17, device="tpu"),
        torch.randn(6, 17, device="tpu"),
        torch.randn(6, device="tpu"),
    ),
    "conv2d": lambda: F.conv2d(
        torch.randn(1, 3, 9, 9, device="tpu"), torch.randn(4, 3, 3, 3, device="tpu")
    ),
    "einsum": lambda: torch.einsum(
        "ij,jk->ik", torch.randn(5, 19, device="tpu"), torch.randn(19, 3, device="tpu")
    ),
}
OPS = {
    "mm": "dot_general",
    "bmm": "dot_general",
    "linear": "dot_general",
    "conv2d": "convolution",
    "einsum": "dot_general",
}


@pytest.mark.parametrize("setting", ["highest", "high", "medium"])
@pytest.mark.parametrize("case", list(CASES))
def test_float32_matmuls_carry_the_precision(case, setting, dumped):
    torch.set_float32_matmul_precision(setting)
    before = len(dumped())
    CASES[case]().cpu()
    new = [t for t in dumped()[before:] if f'"stablehlo.{OPS[case]}"' in t]
    assert new, f"no program with a {OPS[case]} was compiled"
    for text in new:
        if EXPECTED[setting] is None:
            assert "precision_config" not in text
        else:
            assert EXPECTED[setting] in text
            assert text.count("precision_config") == text.count(f'"stablehlo.{OPS[case]}"')


def test_half_precision_matmuls_carry_none(dumped):
    torch.set_float32_matmul_precision("highest")
    before = len(dumped())
    a = torch.randn(3, 23, device="tpu", dtype=torch.bfloat16)
    (a @ torch.randn(23, 2, device="tpu", dtype=torch.bfloat16)).cpu()
    new = [t for t in dumped()[before:] if '"stablehlo.dot_general"' in t]
    assert new and all("precision_config" not in t for t in new)


def test_changing_the_setting_compiles_once(dumped):
    a, b = torch.randn(3, 29, device="tpu"), torch.randn(29, 4, device="tpu")
    torch.set_float32_matmul_precision("highest")
    want = a.cpu() @ b.cpu()
    torch.testing.assert_close((a @ b).cpu(), want)
    compiles = []
    for setting in ("high", "high", "highest", "high"):
        torch.set_float32_matmul_precision(setting)
        start = torch_tpu.metrics.snapshot()["compiles"]
        torch.testing.assert_close((a @ b).cpu(), want)  # float32 on the CPU plugin either way
        compiles.append(torch_tpu.metrics.snapshot()["compiles"] - start)
    assert compiles == [1, 0, 0, 0]
    assert len([t for t in dumped() if "precision HIGH>" in t and "29" in t]) == 1


def test_torchtpu_precision_names(dumped):
    torch.set_float32_matmul_precision("highest")
    assert [p.name for p in torch.tpu.Precision] == ["DEFAULT", "HIGH", "HIGHEST"]
    with torch.tpu.precision(torch.tpu.Precision.DEFAULT):
        assert torch.get_float32_matmul_precision() == "medium"
        torch.tpu.precision("HIGH")
        assert torch.get_float32_matmul_precision() == "high"
    assert torch.get_float32_matmul_precision() == "highest"
    with pytest.raises(ValueError, match="unknown matmul precision"):
        torch.tpu.precision("fast")
