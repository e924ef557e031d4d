"""The eager-mode API and the debug mode: same results as strict, errors and NaNs
named at the operator that caused them, every bad index caught at its op."""

import os
import subprocess
import sys

import pytest
import torch

import torch_tpu


def test_default_mode_is_strict_and_modes_switch():
    assert torch_tpu.get_eager_mode() == "strict"
    with torch_tpu.eager_mode("debug"):
        assert torch_tpu.get_eager_mode() == "debug"
    assert torch_tpu.get_eager_mode() == "strict"


def test_unknown_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown tpu eager mode 'fast'"):
        torch_tpu.set_eager_mode("fast")
    assert torch_tpu.get_eager_mode() == "strict"


def test_all_three_modes_switch_and_nest():
    with torch_tpu.eager_mode("defer_and_fuse"):
        assert torch_tpu.get_eager_mode() == "defer_and_fuse"
        with torch_tpu.eager_mode("debug"):
            assert torch_tpu.get_eager_mode() == "debug"
        assert torch_tpu.get_eager_mode() == "defer_and_fuse"
    assert torch_tpu.get_eager_mode() == "strict"


def test_debug_mode_gives_strict_results():
    x = torch.randn(16, 16)
    expected = ((x @ x.T).relu().sum(dim=1) / 3).cpu()
    with torch_tpu.eager_mode("debug"):
        t = x.to("tpu")
        actual = ((t @ t.T).relu().sum(dim=1) / 3).cpu()
    torch.testing.assert_close(actual, expected)


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def test_environment_selects_debug_mode():
    code = "import torch_tpu; print(torch_tpu.get_eager_mode())"
    assert _run(code, TORCH_TPU_EAGER_MODE="debug").stdout.strip() == "debug"
    assert _run(code, TPU_LAUNCH_BLOCKING="1").stdout.strip() == "debug"
    assert _run(code, TORCH_TPU_EAGER_MODE="defer_and_fuse").stdout.strip() == "defer_and_fuse"
    assert _run(code, TPU_DEFER_AND_FUSE="1").stdout.strip() == "defer_and_fuse"


def test_debug_nans_names_the_first_op_that_made_one():
    code = (
        "import torch, torch_tpu\n"
        "x = torch.tensor([1.0, -1.0], device='tpu')\n"
        "y = x * 2\n"
        "z = torch.sqrt(y)\n"
    )
    result = _run(code, TORCH_TPU_EAGER_MODE="debug", TORCH_TPU_DEBUG_NANS="1")
    assert result.returncode != 0
    assert "aten::sqrt" in result.stderr and "NaN" in result.stderr
    assert "aten::mul" not in result.stderr.split("RuntimeError")[-1]


# Each bad index, the CPU's exception for it, and the same call on tpu tensors.
_W = torch.randn(5, 3)
_BAD_INDEX_CASES = {
    "index_select": lambda w, i: torch.index_select(w, 0, i),
    "index_select_dim1": lambda w, i: torch.index_select(w, 1, i),
    "gather": lambda w, i: torch.gather(w, 0, i.view(-1, 1).expand(-1, 3)),
    "scatter": lambda w, i: w.clone().scatter_(0, i.view(-1, 1).expand(-1, 3), 1.0),
    "scatter_add": lambda w, i: w.clone().scatter_add(0, i.view(-1, 1).expand(-1, 3), w[:2]),
    "getitem": lambda w, i: w[i],
    "getitem_dim1": lambda w, i: w[:, i],
    "index_put": lambda w, i: w.clone().index_put_((i,), torch.tensor(1.0, device=w.device)),
    "setitem": lambda w, i: w.clone().__setitem__(i, 2.0),
    "index_add": lambda w, i: w.clone().index_add_(0, i, w[:2]),
    "index_copy": lambda w, i: w.clone().index_copy_(0, i, w[:2]),
    "index_fill": lambda w, i: w.clone().index_fill_(0, i, 0.0),
    "embedding": lambda w, i: torch.nn.functional.embedding(i, w),
    "nll_loss": lambda w, i: torch.nn.functional.nll_loss(w[:2].log_softmax(1), i),
    "cross_entropy": lambda w, i: torch.nn.functional.cross_entropy(w[:2], i),
}
_BAD_INDICES = {"too_large": [1, 7], "too_negative": [0, -9]}


def _cpu_error(fn, index):
    try:
        fn(_W, torch.tensor(index))
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e)
    return None


@pytest.mark.parametrize("bad", sorted(_BAD_INDICES))
@pytest.mark.parametrize("case", sorted(_BAD_INDEX_CASES))
@pytest.mark.parametrize("mode", ["debug", "defer_and_fuse"])
def test_every_bad_index_is_caught(mode, case, bad):
    fn, index = _BAD_INDEX_CASES[case], _BAD_INDICES[bad]
    expected = _cpu_error(fn, index)
    assert expected is not None, "the CPU accepts this index: the case is wrong"
    w, i = _W.to("tpu"), torch.tensor(index, device="tpu")
    with torch_tpu.eager_mode(mode):
        if mode == "debug":
            # Debug raises at the op itself.
            with pytest.raises(expected):
                fn(w, i)
        else:
            # defer_and_fuse raises the same class once the host waits for the graph
            # (synchronize, .cpu(), .item(), printing) at the latest.
            with pytest.raises(expected):
                fn(w, i)
                torch.tpu.synchronize()
    # The device stays usable afterwards.
    assert (w + 1).sum().item() == pytest.approx((_W + 1).sum().item(), rel=1e-5)


def test_a_bad_index_is_raised_once_even_after_later_graphs_ran():
    # A flush does not wait for the graph before it (so the host records the next step
    # while the device runs this one); a failed check is still raised, exactly once,
    # by a later flush or by the next wait at the latest.
    w = _W.to("tpu")
    with torch_tpu.eager_mode("defer_and_fuse"):
        with pytest.raises(IndexError):
            torch.nn.functional.embedding(torch.tensor([1, 7], device="tpu"), w)
            torch_tpu.sync()
            for _ in range(4):
                w.mul_(1.0)
                torch_tpu.sync()
            torch.tpu.synchronize()
        torch.tpu.synchronize()  # already raised: nothing left to raise
        assert torch.equal(w.cpu(), _W)
