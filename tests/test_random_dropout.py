"""On-device dropout and the bool-valued unary ops, compared with the CPU where the
values are deterministic, and checked statistically where they are random."""

import pytest
import torch
import torch.nn.functional as F

# Every test fails if anything falls back to the CPU (the `native` fixture, conftest.py).
pytestmark = pytest.mark.usefixtures("native")


@pytest.mark.parametrize("p", [0.0, 0.3, 0.9, 1.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_keeps_the_right_fraction_and_scale(p, dtype):
    torch.tpu.manual_seed(1)
    x = torch.ones(20000, device="tpu", dtype=dtype, requires_grad=True)
    y = F.dropout(x, p)
    values = y.detach().float().cpu()
    kept = values != 0
    assert abs(kept.float().mean().item() - (1 - p)) < 0.02
    if p < 1:
        expected = torch.tensor(1 / (1 - p), dtype=dtype).float()
        assert torch.equal(values[kept], expected.expand(int(kept.sum())))
    y.sum().backward()
    assert torch.equal(x.grad.float().cpu() != 0, kept)


def test_dropout_is_reproducible_with_the_device_seed():
    x = torch.ones(1000, device="tpu")
    torch.tpu.manual_seed(7)
    a = F.dropout(x, 0.5).cpu()
    torch.tpu.manual_seed(7)
    b = F.dropout(x, 0.5).cpu()
    assert torch.equal(a, b)
    assert not torch.equal(a, F.dropout(x, 0.5).cpu())


def test_dropout_in_eval_is_identity():
    x = torch.randn(100)
    assert torch.equal(F.dropout(x.to("tpu"), 0.5, training=False).cpu(), x)


@pytest.mark.parametrize("op", [torch.isneginf, torch.isposinf, torch.logical_not])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_bool_valued_unary_ops_match_cpu(op, dtype):
    x = torch.tensor([1.0, -float("inf"), float("inf"), 0.0, float("nan"), -2.0])
    if dtype in (torch.int64, torch.bool):
        x = torch.tensor([1, 0, -3, 5]).to(dtype)
    else:
        x = x.to(dtype)
    assert torch.equal(op(x.to("tpu")).cpu(), op(x))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int8, torch.uint8, torch.bool])
def test_bitwise_not_matches_cpu(dtype):
    x = torch.tensor([0, 1, 5, 100]).to(dtype)
    assert torch.equal(torch.bitwise_not(x.to("tpu")).cpu(), torch.bitwise_not(x))
    y = x.to("tpu")
    y.bitwise_not_()
    assert torch.equal(y.cpu(), ~x)


def test_bitwise_not_of_float_raises_like_cpu():
    with pytest.raises(NotImplementedError):
        torch.bitwise_not(torch.ones(2))
    with pytest.raises(NotImplementedError):
        torch.bitwise_not(torch.ones(2, device="tpu"))


# Distributions drawn on the device: the sample moments of 200k draws against the
# distribution's own (loose bounds, about 10 standard errors).
DISTRIBUTIONS = [
    ("exponential_", (2.0,), lambda x: (x.mean(), 0.5), 0.02),
    ("log_normal_", (0.5, 0.25), lambda x: (x.log().mean(), 0.5), 0.01),
    ("log_normal_", (0.5, 0.25), lambda x: (x.log().std(), 0.25), 0.01),
    ("cauchy_", (1.0, 2.0), lambda x: (x.median(), 1.0), 0.05),
    ("cauchy_", (1.0, 2.0), lambda x: ((x.quantile(0.75) - x.quantile(0.25)) / 2, 2.0), 0.1),
    ("geometric_", (0.25,), lambda x: (x.mean(), 4.0), 0.1),
]


@pytest.mark.parametrize("name,args,moment,tolerance", DISTRIBUTIONS)
def test_distributions_have_their_moments(name, args, moment, tolerance):
    torch.tpu.manual_seed(3)
    x = getattr(torch.empty(200_000, device="tpu"), name)(*args).cpu()
    measured, expected = moment(x)
    assert abs(float(measured) - expected) < tolerance, (name, float(measured))
    if name in ("exponential_", "log_normal_"):
        assert x.min() >= 0
    if name == "geometric_":
        assert x.min() >= 1 and torch.equal(x, x.round())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64, torch.int64])
def test_geometric_and_exponential_keep_the_dtype(dtype):
    x = torch.empty(1000, device="tpu", dtype=dtype).geometric_(0.5)
    assert x.dtype == dtype and x.cpu().min() >= 1
    if dtype.is_floating_point:
        y = torch.empty(1000, device="tpu", dtype=dtype).exponential_()
        assert y.dtype == dtype and y.cpu().min() >= 0


def test_a_tpu_generator_draws_the_same_after_the_same_seed():
    # vLLM samples a seeded request with q.exponential_(generator=its tpu generator).
    generator = torch.Generator(device="tpu")
    draws = []
    for _ in range(2):
        generator.manual_seed(11)
        draws.append(torch.empty(8, device="tpu").exponential_(generator=generator).cpu())
    assert torch.equal(draws[0], draws[1])
    assert not torch.equal(
        draws[0], torch.empty(8, device="tpu").exponential_(generator=generator).cpu()
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x.exponential_(0),
        lambda x: x.log_normal_(0, 0),
        lambda x: x.cauchy_(0, -1),
        lambda x: x.geometric_(1.5),
        lambda x: x.long().exponential_(),
    ],
)
def test_distribution_errors_match_the_cpu(call):
    with pytest.raises(RuntimeError) as on_cpu:
        call(torch.empty(3))
    with pytest.raises(RuntimeError) as on_tpu:
        call(torch.empty(3, device="tpu"))
    assert str(on_tpu.value) == str(on_cpu.value)
