"""The coverage command, and the recompilation policy of a training loop: after
warm-up, changing learning rates (a cosine schedule) compiles nothing new."""

import subprocess
import sys
import textwrap

import torch
from torch import nn

import torch_tpu


def test_coverage_command_lists_native_and_fallback_ops(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch, torch_tpu
            x = torch.ones(4, device="tpu")
            y = x + 1
            torch.special.zeta(x, x)  # no native lowering: falls back
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "torch_tpu.coverage", str(script)],
        capture_output=True,
        text=True,
        env={"TORCH_TPU_CPU_FALLBACK": "silent", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    native, fallback = result.stdout.split("fell back to the CPU")
    assert "aten::add.Tensor" in native
    assert "aten::special_zeta" in fallback


def test_adamw_with_cosine_schedule_stops_compiling_after_warmup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to("tpu")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
    x, y = torch.randn(32, 8, device="tpu"), torch.randn(32, 4, device="tpu")

    def step():
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        return loss.item()

    for _ in range(3):
        step()
    before = torch_tpu.metrics.snapshot()["compiles"]
    lrs = set()
    for _ in range(5):
        step()
        lrs.add(optimizer.param_groups[0]["lr"])
    assert len(lrs) == 5, "the schedule should change the learning rate every step"
    assert torch_tpu.metrics.snapshot()["compiles"] == before
