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


def _programs_for(loop) -> int:
    before = torch_tpu._C._compiled_program_count()
    loop()
    torch.tpu.synchronize()
    return torch_tpu._C._compiled_program_count() - before


def test_view_offsets_are_run_time_operands_so_loops_compile_a_constant_number():
    """x[i] = src[i] * 2 and x[:, j] for every i / j: the offset of each view is passed at
    run time, so the programs compiled do not grow with the number of rows or columns
    (before: two programs per row), in strict and defer_and_fuse modes alike."""
    for mode in ("strict", "defer_and_fuse"):
        counts = []
        for rows in (8, 40):  # shapes of their own, so nothing comes from an earlier loop
            cols = rows + 1
            x = torch.zeros(rows, cols, device="tpu")
            src = torch.randn(rows, cols, device="tpu")
            sums = []

            def loop():
                with torch_tpu.eager_mode(mode):
                    for i in range(rows):
                        x[i] = src[i] * 2
                    torch_tpu.sync()  # defer_and_fuse: one graph per loop, not one big one
                    for j in range(cols):
                        sums.append(x[:, j].sum())

            counts.append(_programs_for(loop))
            expected = src.cpu() * 2
            assert torch.equal(x.cpu(), expected)
            torch.testing.assert_close(torch.stack(sums).cpu(), expected.sum(0))
        assert counts[1] <= counts[0] <= 8, (mode, counts)


def test_compiled_graphs_take_input_views_at_run_time_offsets_and_their_own_at_constant_ones(
    tmp_path, monkeypatch
):
    """A compiled function called on rows x[i], x[i + 1] of one tensor for every i compiles a
    constant number of programs: the inputs' offsets stay run-time operands, also where the
    graph reads an input's storage it has already written (the second row's, after the first
    row's write). Views the graph takes of values it computes itself (q, k, v out of one
    projection) have constant offsets, which XLA reads in place: the program pads and
    dynamically slices nothing."""
    torch._dynamo.reset()

    def bump_two_rows(first, second):
        first.add_(1.0)
        second.mul_(2.0)

    compiled = torch.compile(bump_two_rows, backend="tpu")
    counts = []
    for rows in (6, 30):
        x = torch.randn(rows, rows + 1, device="tpu")
        expected = x.cpu()
        for i in range(rows - 1):
            bump_two_rows(expected[i], expected[i + 1])

        def loop():
            for i in range(rows - 1):
                compiled(x[i], x[i + 1])

        counts.append(_programs_for(loop))
        torch.testing.assert_close(x.cpu(), expected)
    assert counts[1] <= counts[0] <= 8, counts

    def attention_inputs(h, w):
        q, k, v = (h @ w).split(16, dim=-1)
        heads = [t.reshape(4, 8, 2, 8).transpose(1, 2) for t in (q, k, v)]
        return torch.softmax(heads[0] @ heads[1].transpose(-1, -2), -1) @ heads[2]

    monkeypatch.setenv("TORCH_TPU_DUMP_PROGRAMS", str(tmp_path))
    h, w = torch.randn(4, 8, 12), torch.randn(12, 48)
    got = torch.compile(attention_inputs, backend="tpu")(h.to("tpu"), w.to("tpu"))
    torch.testing.assert_close(got.cpu(), attention_inputs(h, w), rtol=1e-5, atol=1e-5)
    graphs = [p.read_text() for p in tmp_path.iterdir() if "graph" in p.name]
    assert graphs, sorted(p.name for p in tmp_path.iterdir())
    for text in graphs:
        assert "stablehlo.pad" not in text and "dynamic_slice" not in text
    torch._dynamo.reset()
