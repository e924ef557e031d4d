"""group_norm, weight_norm, the elementwise losses (binary_cross_entropy, logsigmoid, smooth_l1, huber)
and the random ops randperm and multinomial, all native (CPU fallback is an error).
Deterministic ops are compared with the CPU, values and float32 gradients; random ops are
checked statistically and for reproducibility with the device seed."""

import pytest
import torch
import torch.nn.functional as F

DTYPES = [torch.float32, torch.bfloat16, torch.float64]
REDUCTIONS = ["none", "mean", "sum"]


# Every test fails if anything falls back to the CPU (the `native` fixture, conftest.py).
pytestmark = pytest.mark.usefixtures("native")


def tolerance(dtype):
    return {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {"atol": 1e-5, "rtol": 1e-5}


def check(fn, inputs, dtype=torch.float32, grad=True):
    """fn on tpu copies of `inputs` matches fn on the CPU; for float32 so do the gradients
    with respect to the inputs that require them."""
    cpu = [
        (x.to(dtype) if x.is_floating_point() else x).detach().requires_grad_(x.requires_grad)
        for x in inputs
    ]
    tpu = [x.to("tpu").detach().requires_grad_(x.requires_grad) for x in cpu]
    expected, actual = fn(*cpu), fn(*tpu)
    assert actual.device.type == "tpu" and actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, **tolerance(dtype))
    wrt = [i for i, x in enumerate(cpu) if x.requires_grad]
    if grad and dtype == torch.float32 and wrt:
        seed = torch.randn(expected.shape)
        g_cpu = torch.autograd.grad(expected, [cpu[i] for i in wrt], seed)
        g_tpu = torch.autograd.grad(actual, [tpu[i] for i in wrt], seed.to("tpu"))
        for e, a in zip(g_cpu, g_tpu):
            torch.testing.assert_close(a.cpu(), e, atol=1e-5, rtol=1e-4)


# ---- group_norm ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 4, 2, 3), 2), ((3, 6), 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_matches_cpu(dtype, shape, groups, affine):
    x = torch.randn(shape, requires_grad=True)
    w = torch.randn(shape[1], requires_grad=True) if affine else None
    b = torch.randn(shape[1], requires_grad=True) if affine else None
    if affine:
        check(lambda x, w, b: F.group_norm(x * 3 + 1, groups, w, b, eps=1e-3), [x, w, b], dtype)
    else:
        check(lambda x: F.group_norm(x * 3 + 1, groups), [x], dtype)


def test_group_norm_statistics_and_mixed_precision_match_cpu():
    x = torch.randn(2, 4, 3).bfloat16()
    w, b = torch.randn(4), torch.randn(4)
    expected = torch.native_group_norm(x, w, b, 2, 4, 3, 2, 1e-5)
    actual = torch.native_group_norm(x.to("tpu"), w.to("tpu"), b.to("tpu"), 2, 4, 3, 2, 1e-5)
    for e, a in zip(expected, actual):
        assert a.dtype == e.dtype and a.shape == e.shape
        torch.testing.assert_close(a.cpu(), e, atol=2e-2, rtol=2e-2)


def test_group_norm_module_trains_like_cpu():
    torch.manual_seed(0)
    cpu = torch.nn.GroupNorm(2, 4)
    tpu = torch.nn.GroupNorm(2, 4).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    x = torch.randn(3, 4, 2, 2)
    cpu(x).square().sum().backward()
    tpu(x.to("tpu")).square().sum().backward()
    torch.testing.assert_close(tpu.weight.grad.cpu(), cpu.weight.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(tpu.bias.grad.cpu(), cpu.bias.grad, atol=1e-4, rtol=1e-4)


def test_group_norm_bad_groups_raise_like_cpu():
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(torch.randn(2, 6, 3), 4)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(torch.randn(2, 6, 3, device="tpu"), 4)


# ---- binary cross entropy ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_matches_cpu(dtype, reduction, weighted):
    x = torch.randn(4, 5, requires_grad=True)
    t = torch.rand(4, 5)
    inputs = [x, t] + ([torch.rand(5)] if weighted else [])

    def fn(x, t, w=None):
        return F.binary_cross_entropy(torch.sigmoid(x), t, weight=w, reduction=reduction)

    check(fn, inputs, dtype)


def test_binary_cross_entropy_clamps_the_log_at_minus_100():
    p = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.5])
    t = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0])
    expected = F.binary_cross_entropy(p, t, reduction="none")
    assert expected[0] == 100  # the CPU's clamp, which the tpu must reproduce
    torch.testing.assert_close(
        F.binary_cross_entropy(p.to("tpu"), t.to("tpu"), reduction="none").cpu(), expected
    )


def test_binary_cross_entropy_out_variant_resizes():
    p, t = torch.rand(3, 2), torch.rand(3, 2)
    out = torch.empty(7, device="tpu")
    torch.ops.aten.binary_cross_entropy.out(p.to("tpu"), t.to("tpu"), None, 0, out=out)
    torch.testing.assert_close(out.cpu(), F.binary_cross_entropy(p, t, reduction="none"))


def test_binary_cross_entropy_out_of_range_input_raises_like_cpu():
    p, t = torch.tensor([0.5, 1.5]), torch.tensor([1.0, 0.0])
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(p, t)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(p.to("tpu"), t.to("tpu"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("pos_weight", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_with_logits_matches_cpu(dtype, reduction, pos_weight, weighted):
    x = torch.randn(6, 3, requires_grad=True) * 4
    inputs = [x.detach().requires_grad_(), torch.rand(6, 3), torch.rand(3) + 0.5, torch.rand(3)]

    def fn(x, t, pw, w):
        return F.binary_cross_entropy_with_logits(
            x,
            t,
            weight=w if weighted else None,
            pos_weight=pw if pos_weight else None,
            reduction=reduction,
        )

    check(fn, inputs, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_logsigmoid_matches_cpu(dtype):
    x = torch.tensor([-200.0, -20.0, -1.0, 0.0, 0.5, 3.0, 40.0, 200.0]).requires_grad_()
    check(F.logsigmoid, [x], dtype)
    check(torch.nn.LogSigmoid(), [torch.randn(3, 4).requires_grad_()], dtype)


def test_logsigmoid_out_variants_match_cpu():
    x, g = torch.randn(5), torch.randn(5)
    out, buffer = torch.empty(0, device="tpu"), torch.empty(0, device="tpu")
    torch.ops.aten.log_sigmoid_forward.output(x.to("tpu"), output=out, buffer=buffer)
    torch.testing.assert_close(out.cpu(), F.logsigmoid(x))
    grad_input = torch.empty(0, device="tpu")
    cpu_buffer = torch.ops.aten.log_sigmoid_forward(x)[1]
    expected = torch.ops.aten.log_sigmoid_backward(g, x, cpu_buffer)
    torch.ops.aten.log_sigmoid_backward.grad_input(
        g.to("tpu"), x.to("tpu"), buffer, grad_input=grad_input
    )
    torch.testing.assert_close(grad_input.cpu(), expected)


# ---- smooth_l1 and huber ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", [0.5, 1.0, 2.0])
def test_smooth_l1_loss_matches_cpu(dtype, reduction, beta):
    x = (torch.randn(5, 4) * 2).requires_grad_()
    t = torch.randn(5, 4).requires_grad_()
    check(lambda x, t: F.smooth_l1_loss(x, t, reduction=reduction, beta=beta), [x, t], dtype)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_smooth_l1_loss_with_beta_zero_is_l1_like_cpu(reduction):
    # F.smooth_l1_loss sends beta = 0 to l1_loss; the aten op itself must still handle it.
    x, t, g = torch.randn(5, 4), torch.randn(5, 4), torch.randn(5, 4)
    t[0, 0] = x[0, 0]  # a zero difference: the CPU's rule (d <= -beta) gives -1 there
    args = [x, t]
    tpu_args = [a.to("tpu") for a in args]
    expected = torch.ops.aten.smooth_l1_loss(*args, reduction, 0.0)
    actual = torch.ops.aten.smooth_l1_loss(*tpu_args, reduction, 0.0)
    torch.testing.assert_close(actual.cpu(), expected)
    grad = g if reduction == 0 else g[0, 0]
    expected = torch.ops.aten.smooth_l1_loss_backward(grad, *args, reduction, 0.0)
    actual = torch.ops.aten.smooth_l1_loss_backward(grad.to("tpu"), *tpu_args, reduction, 0.0)
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("delta", [0.5, 1.0, 3.0])
def test_huber_loss_matches_cpu(dtype, reduction, delta):
    x = (torch.randn(5, 4) * 2).requires_grad_()
    t = torch.randn(5, 4).requires_grad_()
    check(lambda x, t: F.huber_loss(x, t, reduction=reduction, delta=delta), [x, t], dtype)


def test_robust_losses_broadcast_and_out_variants_match_cpu():
    x, t = torch.randn(3, 4), torch.randn(4)
    for name in ["smooth_l1_loss", "huber_loss"]:
        op = getattr(torch.ops.aten, name)
        out = torch.empty(0, device="tpu")
        op.out(x.to("tpu"), t.to("tpu"), 0, 0.7, out=out)
        torch.testing.assert_close(out.cpu(), op(x, t, 0, 0.7))
    g = torch.randn(3, 4)
    grad = torch.empty(0, device="tpu")
    torch.ops.aten.huber_loss_backward.out(
        g.to("tpu"), x.to("tpu"), t.to("tpu"), 0, 0.7, grad_input=grad
    )
    torch.testing.assert_close(grad.cpu(), torch.ops.aten.huber_loss_backward(g, x, t, 0, 0.7))


def test_robust_losses_bad_parameters_raise_like_cpu():
    for device in ["cpu", "tpu"]:
        x = torch.randn(3, device=device)
        with pytest.raises(RuntimeError, match="negative values for beta"):
            F.smooth_l1_loss(x, x, beta=-1.0)
        with pytest.raises(RuntimeError, match="non-positive values for delta"):
            F.huber_loss(x, x, delta=0.0)


# ---- cross_entropy variants composed of native ops ----


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_with_label_smoothing_and_probabilities_matches_cpu(reduction):
    x = torch.randn(6, 5, requires_grad=True)
    labels = torch.tensor([0, 4, 2, 1, 3, 2])
    check(lambda x, y: F.cross_entropy(x, y, label_smoothing=0.2, reduction=reduction), [x, labels])
    probabilities = torch.rand(6, 5).softmax(1)
    check(lambda x, p: F.cross_entropy(x, p, reduction=reduction), [x, probabilities])
    check(
        lambda x, p: F.cross_entropy(x, p, label_smoothing=0.1, reduction=reduction),
        [x, probabilities],
    )


# ---- weight_norm (the fused interface: the norm over every dim but the first or last) ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_matches_cpu(dtype, dim):
    v = torch.randn(5, 3, 4, requires_grad=True)
    g = torch.randn(v.shape[dim], requires_grad=True)
    gain_shape = [v.shape[i] if i == dim else 1 for i in range(v.dim())]
    check(lambda v, g: torch._weight_norm(v, g.view(gain_shape), dim), [v, g], dtype)


def test_weight_norm_interface_returns_the_norm_in_float32_for_half_weights():
    v, g = torch.randn(4, 6).bfloat16(), torch.randn(4, 1).bfloat16()
    w, norm = torch._weight_norm_interface(v.to("tpu"), g.to("tpu"), 0)
    expected_w, expected_norm = torch._weight_norm_interface(v, g, 0)
    assert (w.dtype, norm.dtype) == (expected_w.dtype, expected_norm.dtype)
    torch.testing.assert_close(norm.cpu(), expected_norm)
    torch.testing.assert_close(w.cpu(), expected_w, **tolerance(torch.bfloat16))


def test_weight_norm_conv_trains_like_cpu():
    # wav2vec2's positional convolution: weight norm over the kernel dimension (the last)
    torch.manual_seed(0)
    cpu = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 4, 3, groups=2), dim=2)
    tpu = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 4, 3, groups=2), dim=2)
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    x = torch.randn(2, 4, 9)
    cpu(x).square().sum().backward()
    tpu(x.to("tpu")).square().sum().backward()
    for (name, expected), actual in zip(cpu.named_parameters(), tpu.parameters()):
        torch.testing.assert_close(actual.grad.cpu(), expected.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_weight_norm_interface_on_a_middle_dim_raises_like_cpu():
    for device in ["cpu", "tpu"]:
        v, g = torch.randn(2, 3, 4, device=device), torch.randn(1, 3, 1, device=device)
        with pytest.raises(RuntimeError, match="first or last dim"):
            torch._weight_norm_interface(v, g, 1)


# ---- randperm ----


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32])
def test_randperm_is_a_permutation(n, dtype):
    p = torch.randperm(n, device="tpu", dtype=dtype)
    assert p.device.type == "tpu" and p.dtype == dtype and p.shape == (n,)
    assert torch.equal(p.cpu().sort().values, torch.arange(n, dtype=dtype))


def test_randperm_is_uniform_and_reproducible_with_the_seed():
    torch.tpu.manual_seed(3)
    a = torch.randperm(50, device="tpu").cpu()
    torch.tpu.manual_seed(3)
    assert torch.equal(torch.randperm(50, device="tpu").cpu(), a)
    assert not torch.equal(torch.randperm(50, device="tpu").cpu(), a)
    # Where element 0 lands, over many permutations of 4: each position about 1/4 of the time.
    firsts = torch.stack([torch.randperm(4, device="tpu") for _ in range(400)]).cpu()
    counts = torch.bincount((firsts == 0).nonzero()[:, 1], minlength=4)
    assert counts.min() > 60 and counts.max() < 140


def test_randperm_generator_and_out_variants():
    g = torch.Generator(device="tpu")
    g.manual_seed(5)
    a = torch.randperm(20, generator=g, device="tpu").cpu()
    g.manual_seed(5)
    out = torch.empty(3, dtype=torch.int64, device="tpu")
    with pytest.warns(UserWarning, match="resized"):  # as the CPU warns for a non-empty out
        torch.randperm(20, generator=g, out=out)
    assert torch.equal(out.cpu(), a)
    out = torch.empty(0, dtype=torch.int64, device="tpu")
    torch.randperm(9, out=out)
    assert torch.equal(out.cpu().sort().values, torch.arange(9))


def test_randperm_bad_arguments_raise_like_cpu():
    for device in ["cpu", "tpu"]:
        with pytest.raises(RuntimeError):
            torch.randperm(-1, device=device)
        with pytest.raises(RuntimeError):
            torch.randperm(3000, dtype=torch.float16, device=device)


# ---- multinomial ----


@pytest.mark.parametrize("replacement", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_multinomial_single_draws_follow_the_probabilities(replacement, dtype):
    torch.tpu.manual_seed(0)
    probabilities = torch.tensor([0.1, 0.0, 0.6, 0.3])
    weights = (probabilities * 5).to(dtype).to("tpu")  # unnormalised is fine
    draws = torch.multinomial(weights.expand(4000, 4), 1, replacement).cpu()
    assert draws.dtype == torch.int64 and draws.shape == (4000, 1)
    frequencies = torch.bincount(draws.flatten(), minlength=4) / 4000
    assert frequencies[1] == 0
    torch.testing.assert_close(frequencies, probabilities, atol=0.03, rtol=0)


def test_multinomial_with_replacement_draws_many_per_row():
    torch.tpu.manual_seed(1)
    probabilities = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.2, 0.8]])
    draws = torch.multinomial(probabilities.to("tpu"), 3000, replacement=True).cpu()
    assert draws.shape == (2, 3000)
    for row, p in zip(draws, probabilities):
        torch.testing.assert_close(torch.bincount(row, minlength=3) / 3000, p, atol=0.04, rtol=0)


def test_multinomial_without_replacement_draws_distinct_categories():
    torch.tpu.manual_seed(2)
    weights = torch.tensor([1.0, 2.0, 0.0, 4.0, 8.0, 1.0])
    draws = torch.multinomial(weights.to("tpu").expand(500, 6), 5).cpu()
    assert draws.shape == (500, 5)
    assert all(len(set(row.tolist())) == 5 for row in draws)
    assert (draws[:, :4] != 2).all()  # the zero-weight category only once the rest are drawn
    # The heaviest category comes first most often: p = 8 / 16.
    assert abs((draws[:, 0] == 4).float().mean().item() - 0.5) < 0.07
    everything = torch.multinomial(weights.to("tpu"), 6).cpu()
    assert torch.equal(everything.sort().values, torch.arange(6))


def test_multinomial_is_reproducible_with_the_seed_and_has_an_out_variant():
    weights = torch.rand(3, 10).to("tpu")
    torch.tpu.manual_seed(9)
    a = torch.multinomial(weights, 4).cpu()
    torch.tpu.manual_seed(9)
    out = torch.empty(0, dtype=torch.int64, device="tpu")
    torch.multinomial(weights, 4, out=out)
    assert torch.equal(out.cpu(), a)


@pytest.mark.parametrize(
    "probabilities,n,replacement,message",
    [
        ([1.0, 2.0], 0, False, "n_sample <= 0"),
        ([1.0, 2.0], 3, False, "without replacement"),
        ([-1.0, 2.0], 1, False, "element < 0"),
        ([0.0, 0.0], 1, False, "sum of probabilities"),
        ([-1.0, 2.0], 2, True, "entry < 0"),
        ([float("inf"), 2.0], 2, True, "infinity or NaN"),
        ([0.0, 0.0], 2, True, "sum of probabilities"),
    ],
)
def test_multinomial_bad_input_raises_like_cpu(probabilities, n, replacement, message):
    for device in ["cpu", "tpu"]:
        with pytest.raises(RuntimeError, match=message):
            torch.multinomial(torch.tensor(probabilities, device=device), n, replacement)
    with pytest.raises(RuntimeError, match="floating-point"):
        torch.multinomial(torch.tensor([1, 2], device="tpu"), 1)
