"""Mixed precision: torch.autocast("tpu") casts as PyTorch's autocast op lists say
(matmul, linear, convolution in the low-precision dtype; softmax, norms, losses,
reductions in float32; mixed inputs promoted), bfloat16 by default and float16 too, with
results close to CPU autocast's; torch.amp.GradScaler("tpu") scales, unscales, skips
steps on infinities and updates its scale exactly as on the CPU, with no CPU fallback."""

import pytest
import torch
import torch.nn.functional as F

LOW = [torch.bfloat16, torch.float16]
TOL = {torch.bfloat16: dict(rtol=4e-2, atol=4e-2), torch.float16: dict(rtol=5e-3, atol=5e-3)}


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_bfloat16_is_the_default_autocast_dtype():
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert torch.bfloat16 in torch.tpu.get_amp_supported_dtype()
    with torch.autocast("tpu"):
        assert torch.is_autocast_enabled("tpu")
        assert not torch.is_autocast_enabled("cpu")
        y = torch.ones(4, 4, device="tpu") @ torch.ones(4, 4, device="tpu")
    assert y.dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("tpu")


# The output dtype of each op under autocast with low-precision dtype `low`, from the
# op lists PyTorch's autocast documents (the CUDA lists): float32 inputs everywhere.
def _cases(low):
    a, b = randn(8, 16, seed=1), randn(16, 8, seed=2)
    img, kernel = randn(2, 3, 8, 8, seed=3), randn(4, 3, 3, 3, seed=4)
    half = randn(8, 8, seed=5)
    return [
        ("mm", lambda t: torch.mm(t(a), t(b)), low),
        ("linear", lambda t: F.linear(t(a), t(b.T), t(b[0])), low),
        ("conv2d", lambda t: F.conv2d(t(img), t(kernel), padding=1), low),
        ("bmm", lambda t: torch.bmm(t(a)[None], t(b)[None]), low),
        ("sdpa", lambda t: F.scaled_dot_product_attention(*[t(half)[None]] * 3), low),
        # float32 ops, fed the low-precision output of a matmul
        ("softmax", lambda t: F.softmax(t(a) @ t(b), dim=-1), torch.float32),
        ("log_softmax", lambda t: F.log_softmax(t(a) @ t(b), dim=-1), torch.float32),
        ("layer_norm", lambda t: F.layer_norm(t(a) @ t(b), (8,)), torch.float32),
        ("sum", lambda t: (t(a) @ t(b)).sum(), torch.float32),
        ("exp", lambda t: (t(a) @ t(b)).exp(), torch.float32),
        ("mse_loss", lambda t: F.mse_loss(t(a) @ t(b), t(half)), torch.float32),
        (
            "cross_entropy",
            lambda t: F.cross_entropy(t(a) @ t(b), torch.arange(8).to(t(a).device)),
            torch.float32,
        ),
        # promote: mixed float32 and low precision give float32
        ("addcmul", lambda t: torch.addcmul(t(half), t(a) @ t(b), t(half)), torch.float32),
        # not listed: keeps its input's dtype
        ("relu", lambda t: torch.relu(t(a) @ t(b)), low),
    ]


@pytest.mark.parametrize("low", LOW, ids=str)
def test_autocast_op_dtypes_and_values(low):
    for name, fn, expected in _cases(low):
        with torch.autocast("tpu", dtype=low):
            out = fn(lambda x: x.to("tpu"))
        assert out.dtype == expected, f"{name}: {out.dtype} != {expected}"
        assert out.device.type == "tpu"
        # The same computation on the CPU, with the same casts made by hand.
        with torch.autocast("cpu", dtype=low):
            ref = fn(lambda x: x)
        torch.testing.assert_close(
            out.cpu().float(), ref.float(), **TOL[low], msg=lambda m, name=name: f"{name}: {m}"
        )


def test_binary_cross_entropy_is_refused_under_autocast():
    p, target = torch.rand(4, device="tpu"), torch.rand(4, device="tpu")
    with torch.autocast("tpu"), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(p, target)


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.norm = torch.nn.LayerNorm(4 * 6 * 6)
        self.fc = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        h = torch.relu(self.conv(x)).flatten(1)
        h = self.norm(h)
        return self.fc(h)


@pytest.mark.parametrize("low", LOW, ids=str)
def test_model_forward_backward_matches_cpu_autocast(low):
    torch.manual_seed(0)
    cpu_model = Small()
    tpu_model = Small()
    tpu_model.load_state_dict(cpu_model.state_dict())
    tpu_model.to("tpu")
    x, target = randn(3, 3, 6, 6, seed=7), torch.tensor([0, 3, 1])

    def step(model, device):
        with torch.autocast(device, dtype=low):
            logits = model(x.to(device))
            probs = F.softmax(logits, dim=-1)
            loss = F.cross_entropy(logits, target.to(device))
        loss.backward()
        return logits, probs, loss

    logits, probs, loss = step(tpu_model, "tpu")
    ref_logits, ref_probs, ref_loss = step(cpu_model, "cpu")
    assert logits.dtype == ref_logits.dtype == low
    assert loss.dtype == ref_loss.dtype == torch.float32
    assert probs.dtype == torch.float32
    torch.testing.assert_close(logits.cpu(), ref_logits, **TOL[low])
    torch.testing.assert_close(probs.cpu(), ref_probs.float(), **TOL[low])
    torch.testing.assert_close(loss.cpu(), ref_loss, **TOL[low])
    for (name, p), ref in zip(tpu_model.named_parameters(), cpu_model.parameters()):
        assert p.grad.dtype == torch.float32, name
        torch.testing.assert_close(p.grad.cpu(), ref.grad, **TOL[low], msg=name)


def test_grad_scaler_matches_cpu(native):
    def train(device):
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 4).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(device, init_scale=2.0**10, growth_interval=2)
        scales, steps = [], []
        for i in range(6):
            x = randn(5, 8, seed=i).to(device)
            if i == 3:  # an overflow: the step is skipped and the scale backs off
                x[0, 0] = float("inf")
            with torch.autocast(device, dtype=torch.float16):
                loss = model(x).float().pow(2).mean()
            opt.zero_grad()
            scaler.scale(loss).backward()
            before = model.weight.detach().clone()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            steps.append(not torch.equal(before.cpu(), model.weight.detach().cpu()))
        return scales, steps, [p.detach().cpu() for p in model.parameters()]

    scales, steps, params = train("tpu")
    ref_scales, ref_steps, ref_params = train("cpu")
    assert scales == ref_scales
    assert steps == ref_steps == [True, True, True, False, True, True]
    assert ref_scales == [2.0**10, 2.0**11, 2.0**11, 2.0**10, 2.0**10, 2.0**11]
    for p, ref in zip(params, ref_params):
        torch.testing.assert_close(p, ref, rtol=5e-3, atol=5e-3)


def test_amp_kernels_directly():
    grads = [
        torch.tensor([1.0, 2.0], device="tpu"),
        torch.tensor([4.0], device="tpu", dtype=torch.float16),
    ]
    found = torch.zeros(1, device="tpu")
    torch._amp_foreach_non_finite_check_and_unscale_(
        grads, found, torch.full((1,), 0.5, device="tpu")
    )
    assert found.item() == 0.0
    assert grads[0].tolist() == [0.5, 1.0] and grads[1].tolist() == [2.0]
    grads.append(torch.tensor([float("nan")], device="tpu"))
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.ones(1, device="tpu"))
    assert found.item() == 1.0

    scale = torch.full((), 4.0, device="tpu")
    tracker = torch.zeros((), dtype=torch.int32, device="tpu")
    no_inf = torch.zeros((), device="tpu")
    torch._amp_update_scale_(scale, tracker, no_inf, 2.0, 0.5, 2)
    assert (scale.item(), tracker.item()) == (4.0, 1)
    torch._amp_update_scale_(scale, tracker, no_inf, 2.0, 0.5, 2)
    assert (scale.item(), tracker.item()) == (8.0, 0)
    torch._amp_update_scale_(scale, tracker, torch.ones((), device="tpu"), 2.0, 0.5, 2)
    assert (scale.item(), tracker.item()) == (4.0, 0)
    huge = torch.full((), 3e38, device="tpu")
    tracker.fill_(1)
    torch._amp_update_scale_(huge, tracker, no_inf, 2.0, 0.5, 2)
    assert huge.item() == pytest.approx(3e38) and tracker.item() == 0  # never grows to inf
    with pytest.raises(RuntimeError, match="growth_tracker must be an int tensor"):
        torch._amp_update_scale_(scale, tracker.float(), no_inf, 2.0, 0.5, 2)
