"""What PyTorch's own device tests (``python -m torch_tpu.conformance``) found wrong, each
checked against PyTorch on the CPU: NaN through maximum/minimum/clamp, IndexError for index
tensors that do not broadcast, nonzero's out= checks, torch.mode(out=)."""

import pytest
import torch

import torch_tpu

TPU = "tpu"
NAN = float("nan")
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("op", [torch.maximum, torch.minimum, torch.fmax, torch.fmin],
                         ids=lambda f: f.__name__)  # fmt: skip
def test_nan_on_either_side(op, dtype):
    a = torch.tensor([1.0, NAN, NAN, 2.0, -0.5], dtype=dtype)
    b = torch.tensor([NAN, 0.0, NAN, 1.0, 3.0], dtype=dtype)
    same(op(a.to(TPU), b.to(TPU)), op(a, b))
    same(op(b.to(TPU), a.to(TPU)), op(b, a))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_clamp_with_nan_bounds(dtype):
    x = torch.tensor([-2.0, 0.5, NAN, 4.0], dtype=dtype)
    t = x.to(TPU)
    for low, high in [(NAN, None), (None, NAN), (NAN, 3.0), (0.0, NAN), (0.0, 1.0)]:
        same(torch.clamp(t, low, high), torch.clamp(x, low, high))
        same(t.clone().clamp_(low, high), x.clone().clamp_(low, high))
    bound = torch.tensor([NAN, 0.0, 1.0, NAN], dtype=dtype)
    same(torch.clamp(t, min=bound.to(TPU)), torch.clamp(x, min=bound))
    same(torch.clamp(t, max=bound.to(TPU)), torch.clamp(x, max=bound))


def test_index_tensors_that_do_not_broadcast_raise_index_error():
    x = torch.arange(12.0).reshape(3, 4)
    rows, cols = torch.tensor([0, 1]), torch.tensor([0, 1, 2])
    for device in ("cpu", TPU):
        t = x.to(device)
        with pytest.raises(
            IndexError, match=r"could not be broadcast together with shapes \[2\], \[3\]"
        ):
            t[rows.to(device), cols.to(device)]
        with pytest.raises(IndexError, match="could not be broadcast"):
            t.index_put_((rows.to(device), cols.to(device)), torch.tensor(1.0, device=device))
        with pytest.raises(IndexError, match="could not be broadcast"):
            t[rows.to(device), cols.to(device)] = 5.0
    # broadcastable shapes still work, and agree with the CPU
    r, c = torch.tensor([[0], [2]]), torch.tensor([1, 3])
    same(x.to(TPU)[r.to(TPU), c.to(TPU)], x[r, c])


def test_nonzero_out_checks_device_and_dtype():
    t = torch.tensor([[0, 1], [2, 0]], device=TPU)
    with pytest.raises(RuntimeError, match="on the same device"):
        torch.nonzero(t, out=torch.empty(0, dtype=torch.long))
    with pytest.raises(RuntimeError, match="scalar type Long"):
        torch.nonzero(t, out=torch.empty(0, dtype=torch.float, device=TPU))
    out = torch.empty(0, dtype=torch.long, device=TPU)
    torch.nonzero(t, out=out)
    same(out, torch.nonzero(t.cpu()))


def test_mode_with_out():
    x = torch.tensor([[1, 2, 2, 3], [4, 4, 1, 1], [0, 5, 5, 5]], dtype=torch.float32)
    values = torch.empty(0, device=TPU)
    indices = torch.empty(0, dtype=torch.long, device=TPU)
    result = torch.mode(x.to(TPU), 1, out=(values, indices))
    expected = torch.mode(x, 1)
    assert result.values is values and result.indices is indices
    same(values, expected.values)
    same(indices, expected.indices)
    for x_type, v_type, i_type, which in [
        (torch.uint8, torch.int8, torch.long, "values"),
        (torch.uint8, torch.uint8, torch.int8, "indices"),
    ]:
        for device in ("cpu", TPU):
            x8 = torch.ones(10, dtype=x_type, device=device)
            out = (torch.ones(10, dtype=v_type, device=device),
                   torch.ones(10, dtype=i_type, device=device))  # fmt: skip
            with pytest.raises(
                RuntimeError, match=f"expected scalar type .* but got .* for {which}"
            ):
                torch.mode(x8, -1, True, out=out)
    with pytest.raises(RuntimeError, match="expected values and indices on tpu"):
        torch.mode(x.to(TPU), 1, out=(torch.empty(0), torch.empty(0, dtype=torch.long)))


def test_masked_assignment_is_a_masked_fill_without_data_dependent_shapes():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 5, 6, generator=g)
    for index in [
        (torch.randn(4, 5, 6, generator=g) > 0,),
        (torch.randn(4, 5, generator=g) > 0,),
        (slice(None), torch.randn(5, 6, generator=g) > 0),
    ]:
        expected = x.clone()
        expected[index] = 7.0
        for value in (7.0, torch.tensor(7.0), torch.tensor(7.0, device=TPU)):
            on_cpu_mask = x.to(TPU)
            on_cpu_mask[index] = value  # a CPU mask, as PyTorch's own tests write it
            same(on_cpu_mask, expected)
            moved = tuple(i.to(TPU) if isinstance(i, torch.Tensor) else i for i in index)
            on_tpu_mask = x.to(TPU)
            on_tpu_mask[moved] = value
            same(on_tpu_mask, expected)
    # one program serves every count of true elements
    before = torch_tpu._C._compiled_program_count()
    for _ in range(6):
        t = torch.randn(8, 9, device=TPU)
        t[torch.randn(8, 9, generator=g) > 0.3] = 0.0
    assert torch_tpu._C._compiled_program_count() - before <= 3
    with pytest.raises(IndexError, match=r"The shape of the mask \[3, 5\] at index 1"):
        torch.zeros(3, 4, device=TPU)[torch.ones(3, 5, dtype=torch.bool)] = 1.0


def test_empty_dimension_and_empty_index_list():
    for device in ("cpu", TPU):
        x = torch.empty(10, 0, device=device)
        with pytest.raises(IndexError, match="index is out of bounds for dimension with size 0"):
            x[:, [0, 1]]
        scalar = torch.rand([], device=device)
        with pytest.raises(RuntimeError, match=r"value tensor of shape \[1\] cannot be broadcast"):
            scalar.index_put([], torch.tensor([1.0], device=device), True)
    # (the CPU kernel itself trips an internal assert on an empty index list it could apply)
    z = torch.zeros(2, 3, device=TPU)
    assert (
        z.index_put([], torch.tensor([1.0, 2.0, 3.0], device=TPU), True).tolist() == [[1, 2, 3]] * 2
    )


def test_masked_assignment_checks_shape_before_dtype():
    for device in ("cpu", TPU):
        a = torch.arange(4, device=device)
        for values in ([], [1.0, 2.0, 3.0]):
            with pytest.raises(RuntimeError, match="shape mismatch"):
                a[a > -1] = torch.tensor(values).to(device)
        a[a > 1] = torch.tensor(7.5)  # a CPU value is converted, as the CPU's masked fill does
        assert a.tolist() == [0, 1, 7, 7]


def test_in_place_abs_of_a_complex_tensor_is_refused():
    for device in ("cpu", TPU):
        z = torch.tensor([1 + 2j, -3j], device=device)
        with pytest.raises(RuntimeError, match="In-place abs is not supported for complex"):
            z.abs_()
    x = torch.tensor([-1.5, 2.0], device=TPU)
    assert x.abs_().tolist() == [1.5, 2.0]


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bool, torch.int8, torch.int64], ids=str)
def test_sign_and_sgn_of_integers_and_bool(dtype):
    """stablehlo.sign takes no unsigned integers: uint8's sign failed to compile."""
    x = torch.tensor([0, 1, 7, 100, 127], dtype=torch.int64).to(dtype)
    if dtype.is_signed:
        x = torch.cat([x, -x])
    for op in (torch.sign, torch.sgn):
        same(op(x.to(TPU)), op(x))
    same(x.to(TPU).sign_(), x.clone().sign_())


def raised(fn):
    """The first line of the RuntimeError fn raises (fails the test if none)."""
    with pytest.raises(RuntimeError) as error:
        fn()
    return str(error.value).splitlines()[0]


RANDOM_RANGES = [
    (torch.uint8, -1, 10),  # from below the dtype's range
    (torch.uint8, 0, 257),  # to - 1 above it
    (torch.int8, -129, 0),
    (torch.int32, 0, 1 << 40),
    (torch.bool, 0, 3),
    (torch.float16, 0, 1 << 17),  # cast to float16, from >= to
    (torch.int64, 5, 5),  # an empty range
    (torch.uint8, 300, None),  # from past the largest uint8
]


@pytest.mark.parametrize("dtype, low, high", RANDOM_RANGES, ids=str)
def test_random_range_errors_are_the_cpus(dtype, low, high):
    """random_(from, to) refuses a range outside the dtype with the CPU's own message."""
    expected = raised(lambda: torch.empty(4, dtype=dtype).random_(low, high))
    actual = raised(lambda: torch.empty(4, dtype=dtype, device=TPU).random_(low, high))
    assert actual == expected


def test_random_range_past_a_floats_integers_warns_as_the_cpu_does():
    for device in ("cpu", TPU):
        with pytest.warns(UserWarning, match=r"to - 1 is out of bounds \[-\(2\^24\), 2\^24\]"):
            torch.empty(8, device=device).random_(0, 1 << 26)


@pytest.mark.parametrize(
    "dtype, low, high",
    [
        (torch.uint8, 250, None),  # [250, 255]
        (torch.int8, -128, None),  # [-128, 127]
        (torch.int16, -5, 3),
        (torch.float16, 2040, 2050),  # near 2048 float16 integers are 2 apart
        (torch.bfloat16, 0, None),  # [0, 2^8]
        (torch.bool, 0, None),
    ],
    ids=str,
)
def test_random_values_stay_in_the_cpus_range(dtype, low, high):
    cpu = torch.empty(4000, dtype=dtype).random_(low, high)
    tpu = torch.empty(4000, dtype=dtype, device=TPU).random_(low, high).cpu()
    assert tpu.dtype == dtype
    lo, hi = cpu.double().min().item(), cpu.double().max().item()  # 4000 draws reach both ends
    assert tpu.double().min().item() == lo and tpu.double().max().item() == hi
    assert set(tpu.double().unique().tolist()) <= set(
        torch.arange(lo, hi + 1, dtype=torch.float64).to(dtype).double().tolist()
    )


def test_random_over_all_64_bit_integers():
    lowest = torch.iinfo(torch.int64).min
    values = torch.empty(1000, dtype=torch.int64, device=TPU).random_(lowest, None).cpu()
    assert (values < 0).any() and (values > 0).any()
    assert values.abs().double().median() > 2.0**60  # spread over the whole range
    assert torch.empty(0, device=TPU).random_(3, 7).numel() == 0


def test_random_from_int64_min_to_max():
    """A range past 2^63 (int64's whole span but its top value), as torch.randint(min, max)
    asks for: draws over the whole range, never the excluded top."""
    info = torch.iinfo(torch.int64)
    values = torch.randint(info.min, info.max, (2000,), dtype=torch.int64, device=TPU).cpu()
    assert (values < 0).any() and (values > 0).any()
    assert values.abs().double().median() > 2.0**60
    assert (values != info.max).all()


OUT_OF_RANGE = [1e10, -1e10, 3e9, -3e9, 300.5, -300.5, 70000.7, -1.5, 2.7, -2.7, 0.0]
OUT_OF_RANGE += [float("inf"), float("-inf"), NAN, 2147483520.0, -2147483648.0]


@pytest.mark.parametrize("source", FLOATS, ids=str)
@pytest.mark.parametrize(
    "target", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool], ids=str
)
def test_float_to_integer_casts_out_of_range_as_the_cpu(source, target):
    """C++ casts on x86: the type's minimum for NaN and values out of 32/64-bit range,
    high bits dropped for 8 and 16 bits (300.5 -> int8 44); XLA's convert saturates."""
    x = torch.tensor(OUT_OF_RANGE, dtype=torch.float64).to(source)
    same(x.to(TPU).to(target), x.to(target))
    same(torch.empty(len(OUT_OF_RANGE), dtype=target, device=TPU).copy_(x.to(TPU)), x.to(target))


@pytest.mark.parametrize("shape", [[0, 3], [0, 3, 5, 7], [2, 3, 0, 7], [2, 3, 5, 7, 0]], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss_of_no_rows_is_the_cpus(shape, reduction):
    """No rows to pick a class from: an empty loss, the empty sum 0, the 0/0 mean NaN, and
    a gradient of the input's shape."""
    x = torch.rand(shape, requires_grad=True)
    target = torch.randint(3, (shape[0], *shape[2:]))
    x_tpu = x.detach().to(TPU).requires_grad_()
    expected = torch.nn.functional.nll_loss(x, target, reduction=reduction)
    actual = torch.nn.functional.nll_loss(x_tpu, target.to(TPU), reduction=reduction)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)
    actual.sum().backward()
    assert x_tpu.grad.shape == x.shape


def test_in_place_threshold_of_an_expanded_tensor():
    """Idempotent, so the CPU lets it write elements that share memory; copy_ would not."""
    row = torch.randn(1, 6)
    x = row.to(TPU).expand(6, 6)
    torch.nn.functional.threshold(x, 0.5, -1.0, inplace=True)
    assert torch.equal(x.cpu(), torch.threshold(row, 0.5, -1.0).expand(6, 6))
    assert x.stride() == (0, 1)


def _not_dense_layouts(device):
    return {
        "channels_last slice": torch.ones(2, 3, 3, 6, device=device).contiguous(
            memory_format=torch.channels_last
        )[..., ::2],
        "expanded row": torch.arange(6.0).reshape(1, 6).to(device).expand(6, 6),
        "transposed slice": torch.arange(48.0).reshape(8, 6).to(device).t()[::2],
        "permuted slice": torch.arange(120.0).reshape(4, 5, 6).to(device).permute(2, 0, 1)[::2],
        "expanded and transposed": torch.arange(15.0)
        .reshape(3, 1, 5)
        .to(device)
        .expand(3, 4, 5)
        .transpose(0, 1),
    }


ELEMENTWISE = {
    "mul scalar": lambda x: x * 2,
    "sin": torch.sin,
    "mul broadcast": lambda x: x * torch.ones(x.shape[-1], device=x.device),
    "dropout": lambda x: torch.nn.functional.dropout(x, 1e-10),
}


@pytest.mark.parametrize("op", ELEMENTWISE, ids=str)
@pytest.mark.parametrize("layout", list(_not_dense_layouts("cpu")), ids=str)
def test_results_of_inputs_that_are_not_dense_are_laid_out_as_the_cpus(op, layout):
    """TensorIterator keeps an input's order of dimensions for a result even where the input
    is not dense (a channels_last slice gives a channels_last result): nn/test_dropout's
    discontiguous tests."""
    cpu = ELEMENTWISE[op](_not_dense_layouts("cpu")[layout])
    tpu = ELEMENTWISE[op](_not_dense_layouts(TPU)[layout])
    assert tpu.stride() == cpu.stride()
    torch.testing.assert_close(tpu.cpu(), cpu)


def test_bfloat16_batched_product_of_a_transposed_view():
    """XLA:CPU refused this layout's bfloat16 x bfloat16 = float32 dot (adaptive_avg_pool3d's
    backward reached it): the products equal the CPU's."""
    a = torch.randn(5, 16, dtype=torch.bfloat16).t().unsqueeze(0)  # strides (16, 1, 16)
    b = torch.randn(1, 5, 1536, dtype=torch.bfloat16)
    same(torch.bmm(a.to(TPU), b.to(TPU)), torch.bmm(a, b))


POOLS_2D = {
    "max_pool2d": lambda x: torch.nn.functional.max_pool2d(x, 3, 2, 1),
    "max_pool2d dilated": lambda x: torch.nn.functional.max_pool2d(x, 2, 1, 0, 2, ceil_mode=True),
    "avg_pool2d": lambda x: torch.nn.functional.avg_pool2d(x, 3, 2, 1),
}


@pytest.mark.parametrize("pool", POOLS_2D, ids=str)
@pytest.mark.parametrize("batch", [2, 0])
def test_2d_pooling_of_channels_last_and_empty_batches_is_the_cpus(pool, batch):
    """Results and gradients in the input's memory format, as the CPU lays them out, and an
    empty batch pools to an empty batch."""
    x = torch.randn(batch, 3, 7, 9).contiguous(memory_format=torch.channels_last)
    x_tpu = x.to(TPU).requires_grad_()
    x.requires_grad_()
    expected, actual = POOLS_2D[pool](x), POOLS_2D[pool](x_tpu)
    assert actual.shape == expected.shape and actual.stride() == expected.stride()
    same(actual, expected.detach())
    grad = torch.randn_like(expected)
    expected.backward(grad)
    actual.backward(grad.to(TPU))
    assert x_tpu.grad.stride() == x.grad.stride()
    torch.testing.assert_close(x_tpu.grad.cpu(), x.grad)


def error_of(fn):
    """The class and first line of what fn raises, None if nothing."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the class and words are what is compared
        return type(e), str(e).split("\n")[0]
    return None


@pytest.mark.parametrize(
    "shape, args",
    [
        ((1, 3, 8, 8), dict(kernel_size=2, stride=0)),
        ((1, 3, 8, 8), dict(kernel_size=0)),
        ((1, 3, 8, 8), dict(kernel_size=3, padding=2)),
        ((1, 0, 8, 8), dict(kernel_size=2)),
        ((0, 8, 8), dict(kernel_size=2)),
        ((1, 3, 1, 1), dict(kernel_size=3)),
        ((8,), dict(kernel_size=2)),
    ],
    ids=str,
)
@pytest.mark.parametrize("pool", [torch.nn.functional.max_pool2d, torch.nn.functional.avg_pool2d])
def test_2d_pooling_errors_are_the_cpus(pool, shape, args):
    expected = error_of(lambda: pool(torch.randn(shape), **args))
    assert expected is not None
    assert error_of(lambda: pool(torch.randn(shape, device=TPU), **args)) == expected


def test_complex_random_draws_fill_both_parts():
    """normal_ and uniform_ of a complex tensor draw real and imaginary parts alike, as the
    CPU does (normal_: each part with variance std^2 / 2); the imaginary parts were left 0."""
    normal = torch.empty(20000, dtype=torch.complex64, device=TPU).normal_(0.0, 2.0).cpu()
    expected_std = 2.0 / 2**0.5
    for part in (normal.real, normal.imag):
        assert abs(part.std().item() - expected_std) < 0.05
    uniform = torch.empty(20000, dtype=torch.complex128, device=TPU).uniform_(2.0, 3.0).cpu()
    for part in (uniform.real, uniform.imag):
        assert 2.0 <= part.min().item() and part.max().item() < 3.0
        assert abs(part.mean().item() - 2.5) < 0.02


@pytest.mark.parametrize(
    "draw",
    [
        lambda d: torch.empty(3, dtype=torch.int32, device=d).normal_(),
        lambda d: torch.empty(0, dtype=torch.int32, device=d).uniform_(),
        lambda d: torch.rand(2, 0, dtype=torch.int64, device=d),
        lambda d: torch.randn(3, dtype=torch.int64, device=d),
        lambda d: torch.empty(3, device=d).normal_(0.0, -1.0),
    ],
)
def test_float_draws_refuse_other_dtypes_as_the_cpu(draw):
    """They wrote zeros or rounded draws into integer tensors."""
    expected = error_of(lambda: draw("cpu"))
    assert expected is not None
    assert error_of(lambda: draw(TPU)) == expected


def test_cat_of_legacy_empties_and_into_an_out_of_another_shape():
    x, empty = torch.randn(4, 3, 2, 2), torch.randn(0)
    for parts, dim in [([x, empty], 1), ([empty, x], 1), ([empty, empty], 1)]:
        same(torch.cat([p.to(TPU) for p in parts], dim), torch.cat(parts, dim))
    a = torch.randn(4, 4, 4, 4).contiguous(memory_format=torch.channels_last)
    b = torch.randn(4, 4, 4, 4)
    for parts in [(a, a), (a, b)]:
        for out_shape in [(0,), (8, 4, 4, 4)]:
            expected = torch.cat(parts, out=torch.empty(out_shape))
            actual = torch.cat([p.to(TPU) for p in parts], out=torch.empty(out_shape, device=TPU))
            assert actual.stride() == expected.stride()
            same(actual, expected)


@pytest.mark.parametrize("mode, options", [("bilinear", {"align_corners": False}),
                                           ("bilinear", {"align_corners": True}),
                                           ("nearest", {})], ids=str)  # fmt: skip
@pytest.mark.parametrize("channels_last", [False, True])
def test_uint8_images_resize_as_the_cpu(mode, options, channels_last):
    """uint8 interpolation computed its weights in uint8 (values off by up to 245): now
    within 1 of the CPU's fixed-point kernel, nearest exactly, in the input's layout."""
    x = torch.randint(0, 256, (2, 3, 40, 40), dtype=torch.uint8)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    for size in [(32, 32), (77, 61)]:
        expected = torch.nn.functional.interpolate(x, size=size, mode=mode, **options)
        actual = torch.nn.functional.interpolate(x.to(TPU), size=size, mode=mode, **options)
        assert actual.dtype == torch.uint8 and actual.stride() == expected.stride()
        atol = 0 if mode == "nearest" else 1
        torch.testing.assert_close(actual.cpu().int(), expected.int(), rtol=0, atol=atol)
        floats = torch.nn.functional.interpolate(x.float().to(TPU), size=size, mode=mode, **options)
        assert floats.stride() == expected.stride()


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.uint8], ids=str)
@pytest.mark.parametrize(
    "op",
    [
        lambda x: torch.nn.functional.interpolate(x, size=(3, 3), mode="bilinear"),
        lambda x: torch.nn.functional.interpolate(x, size=(3, 3), mode="nearest"),
        lambda x: torch.nn.functional.adaptive_avg_pool2d(x, (2, 2)),
    ],
)
def test_resampling_refuses_the_dtypes_the_cpu_refuses(op, dtype):
    x = torch.ones(2, 3, 8, 8, dtype=dtype)
    expected = error_of(lambda: op(x))
    assert error_of(lambda: op(x.to(TPU))) == expected


def _with_bits(t, conj, neg):
    if conj:
        t = t.conj()
    if neg:
        t = t._neg_view()
    return t


@pytest.mark.parametrize("src_bits", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("dst_bits", [(False, False), (True, False), (False, True)])
def test_copies_resolve_conjugate_and_negative_views(src_bits, dst_bits):
    """x.conj() and x._neg_view() are bits on the tensor, resolved by copy_ (and so by every
    op, through PyTorch's fallbacks): tpu to tpu, from and to the CPU. They were ignored:
    x.conj() read back unconjugated, and complex gradients of asin, acos, atan were wrong."""
    values = torch.tensor([1 + 2j, 3 - 4j, -0.5 + 0j])
    src_cpu = _with_bits(values.clone(), *src_bits)
    src_tpu = _with_bits(values.to(TPU), *src_bits)
    expected = src_cpu.resolve_conj().resolve_neg()
    same(src_tpu, expected)  # tpu -> CPU
    for src in (src_tpu, src_cpu):  # tpu -> tpu, CPU -> tpu
        dst = _with_bits(torch.zeros(3, dtype=values.dtype, device=TPU), *dst_bits)
        dst.copy_(src)
        assert (dst.is_conj(), dst.is_neg()) == dst_bits
        same(dst, expected)


@pytest.mark.parametrize(
    "fn", [torch.asin, torch.acos, torch.atan, torch.sqrt, torch.log, torch.tanh, torch.sigmoid]
)
def test_complex_gradients_are_the_cpus(fn):
    x = torch.randn(6, dtype=torch.complex128, requires_grad=True)
    x_tpu = x.detach().to(TPU).requires_grad_()
    grad = torch.randn(6, dtype=torch.complex128)
    (expected,) = torch.autograd.grad(fn(x), x, grad)
    (actual,) = torch.autograd.grad(fn(x_tpu), x_tpu, grad.to(TPU))
    torch.testing.assert_close(actual.cpu(), expected)


COMPLEX_REFUSED = {
    "floor": torch.floor,
    "ceil": torch.ceil,
    "trunc": torch.trunc,
    "round": torch.round,
    "erf": torch.erf,  # aborted the process in XLA's compiler
    "erfc": torch.erfc,
    "sign": torch.sign,
    "maximum": lambda z: torch.maximum(z, z),
    "fmin": lambda z: torch.fmin(z, z),
    "clamp": lambda z: torch.clamp(z, 0, 1),
    "clamp_min": lambda z: torch.clamp_min(z, 0),
}


@pytest.mark.parametrize("op", COMPLEX_REFUSED, ids=str)
def test_complex_inputs_the_cpu_refuses_raise_its_error(op):
    """They failed to compile, ran (maximum, sign compared or signed lexicographically) or,
    for erf, aborted the process."""
    z = torch.randn(4, dtype=torch.complex64)
    expected = error_of(lambda: COMPLEX_REFUSED[op](z))
    assert expected is not None
    assert error_of(lambda: COMPLEX_REFUSED[op](z.to(TPU))) == expected


@pytest.mark.parametrize("op", [torch.exp2, torch.sinc, torch.asinh, torch.acosh, torch.atanh])
def test_complex_functions_xla_has_no_complex_form_of(op):
    z = torch.complex(
        torch.randn(64, dtype=torch.float64) * 4, torch.randn(64, dtype=torch.float64)
    )
    z[0] = 0
    z[1] = -3.5  # asinh of a negative real part: no cancellation
    torch.testing.assert_close(op(z.to(TPU)).cpu(), op(z))


def test_xlogy_with_a_number_and_out():
    """xlogy(number, tensor, out=) reached the tpu kernel with a Python float."""
    y = torch.tensor([1, 2, 0], dtype=torch.int8)
    expected = torch.xlogy(3.14, y)
    out = torch.empty_like(expected, device=TPU)
    torch.xlogy(3.14, y.to(TPU), out=out)
    same(out, expected)
    same(torch.xlogy(y.to(TPU), 2.5), torch.xlogy(y, 2.5))


@pytest.mark.parametrize(
    "call",
    [
        lambda d: torch.nn.functional.nll_loss(
            torch.randn(10, 3, device=d),
            torch.zeros(10, dtype=torch.long, device=d),
            weight=torch.ones(1, 3, device=d),
        ),  # fmt: skip
        lambda d: torch.nn.ReplicationPad3d(2)(torch.randn(3, 0, 10, 10, 10, device=d)),
        lambda d: torch.nn.ReflectionPad3d(1)(torch.randn(0, 10, 10, 10, device=d)),
    ],
)
def test_shape_errors_the_cpu_raises(call):
    """A 2-d class weight of the right size, and 3-d padding of an empty non-batch dimension,
    were accepted."""
    expected = error_of(lambda: call("cpu"))
    assert expected is not None
    assert error_of(lambda: call(TPU)) == expected


POOLS_3D_AND_ADAPTIVE = {
    "adaptive_max_pool2d": lambda x: torch.nn.functional.adaptive_max_pool2d(
        x[:, :, 0], (3, 4), return_indices=True
    ),  # fmt: skip
    "adaptive_max_pool3d": lambda x: torch.nn.functional.adaptive_max_pool3d(x, (2, 3, 4)),
    "adaptive_avg_pool3d": lambda x: torch.nn.functional.adaptive_avg_pool3d(x, (2, 3, 4)),
    "max_pool3d": lambda x: torch.nn.functional.max_pool3d(x, 2, return_indices=True),
    "avg_pool3d": lambda x: torch.nn.functional.avg_pool3d(x, 2),
}


@pytest.mark.parametrize("pool", POOLS_3D_AND_ADAPTIVE, ids=str)
@pytest.mark.parametrize("batch", [2, 0])
@pytest.mark.parametrize("channels_last", [False, True])
def test_3d_and_adaptive_pooling_layouts_and_empty_batches(pool, batch, channels_last):
    """Results laid out as the CPU's (channels_last for 2-d adaptive and 3-d max pooling,
    contiguous otherwise), and an empty batch (its reshape had a -1 to infer from nothing)."""
    x = torch.randn(batch, 4, 3, 5, 7)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last_3d)
    expected = POOLS_3D_AND_ADAPTIVE[pool](x)
    actual = POOLS_3D_AND_ADAPTIVE[pool](x.to(TPU))
    for e, a in zip(*(r if isinstance(r, tuple) else (r,) for r in (expected, actual))):
        assert a.stride() == e.stride()
        torch.testing.assert_close(a.cpu(), e)  # averages are summed in another order


@pytest.mark.parametrize(
    "pool",
    [
        lambda x: torch.nn.functional.adaptive_max_pool2d(x, (2, 2)),
        lambda x: torch.nn.functional.adaptive_max_pool3d(x.unsqueeze(2), (1, 2, 2)),
        lambda x: torch.nn.functional.adaptive_avg_pool3d(x.unsqueeze(2), (1, 2, 2)),
    ],
)
@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8], ids=str)
def test_adaptive_pooling_refuses_integers_as_the_cpu(pool, dtype):
    x = torch.ones(2, 3, 8, 8, dtype=dtype)
    expected = error_of(lambda: pool(x))
    assert expected is not None
    assert error_of(lambda: pool(x.to(TPU))) == expected


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("ndim", [2, 3])
def test_batch_norm_gradient_of_half_inputs_without_parameters(dtype, ndim):
    """Its saved statistics are half precision: centring with the rounded mean gave a
    gradient of ~1e-2 where the CPU's is 0 (all-ones gradient) or equal to the bit."""
    x = torch.rand([3] * ndim).to(dtype)
    incoming = (torch.ones_like(x), torch.randn(x.shape).to(dtype))
    grads = {}
    for device in ("cpu", TPU):
        data = x.detach().to(device).requires_grad_()
        norm = torch.nn.BatchNorm1d(3, affine=False).to(device)
        for g in incoming:
            data.grad = None
            norm(data).backward(g.to(device))
            grads.setdefault(device, []).append(data.grad.cpu())
    for actual, expected in zip(grads[TPU], grads["cpu"]):
        torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize(
    "call",
    [
        lambda d: torch.nn.functional.adaptive_max_pool2d(torch.randn(1, 0, 5, 5, device=d), 2),
        lambda d: torch.nn.functional.max_pool3d(torch.ones(1, 0, 5, 5, 5, device=d), 3),
        lambda d: torch.nn.functional.avg_pool3d(torch.ones(1, 0, 5, 5, 5, device=d), 3),
        lambda d: torch.nn.functional.fractional_max_pool2d(
            torch.randn(1, 0, 8, 8, device=d), 2, output_size=(4, 4)
        ),  # fmt: skip
        lambda d: (
            torch.nn.functional.adaptive_max_pool2d(
                torch.randn(1, 4, 6, 5, device=d, requires_grad=True), 0
            )
            .sum()
            .backward()
        ),  # fmt: skip
        lambda d: (
            torch.nn.functional.adaptive_avg_pool2d(
                torch.randn(1, 4, 6, 5, device=d, requires_grad=True), 0
            )
            .sum()
            .backward()
        ),  # fmt: skip
    ],
)
def test_pooling_of_empty_dimensions_raises_the_cpus_error(call):
    expected = error_of(lambda: call("cpu"))
    assert expected is not None
    assert error_of(lambda: call(TPU)) == expected


def test_pooling_gradients_of_empty_batches_and_unbatched_channels_last():
    for x in (torch.randn(0, 4, 6, 6, 6), torch.randn(1, 4, 6, 6, 6)):
        x = x.contiguous(memory_format=torch.channels_last_3d)
        if x.size(0) == 1:
            x = x[0].clone()  # a 4-d input whose channels are innermost
        results = []
        for device in ("cpu", TPU):
            data = x.detach().to(device).requires_grad_()
            out, _ = torch.nn.functional.max_pool3d(data, 3, return_indices=True)
            out.sum().backward()
            results.append((out.stride(), data.grad.cpu()))
        assert results[0][0] == results[1][0]
        same(results[1][1], results[0][1])


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_silu_of_complex_numbers_is_the_cpus(dtype):
    torch.manual_seed(0)
    x, grad = torch.randn(64, dtype=dtype) * 3, torch.randn(64, dtype=dtype)
    torch.testing.assert_close(
        torch.nn.functional.silu(x.to(TPU)).cpu(), torch.nn.functional.silu(x)
    )
    in_place = x.to(TPU)
    torch.nn.functional.silu(in_place, inplace=True)
    torch.testing.assert_close(in_place.cpu(), torch.nn.functional.silu(x))
    torch.testing.assert_close(
        torch.ops.aten.silu_backward(grad.to(TPU), x.to(TPU)).cpu(),
        torch.ops.aten.silu_backward(grad, x),
    )
    with pytest.raises(NotImplementedError, match="not implemented for 'Int'"):
        torch.nn.functional.silu(torch.ones(3, dtype=torch.int32, device=TPU))


def test_arange_into_an_out_of_the_right_count_keeps_its_layout():
    for make in (
        lambda d: torch.zeros(2, 3, device=d).narrow(1, 1, 2),  # a 2x2 view, not contiguous
        lambda d: torch.zeros(3, 3, 5, dtype=torch.int64, device=d).permute(2, 0, 1),
        lambda d: torch.zeros(0, device=d),  # another count: resized
    ):
        expected, actual = make("cpu"), make(TPU)
        torch.arange(0, 45 if expected.numel() == 45 else 4, out=expected)
        torch.arange(0, 45 if actual.numel() == 45 else 4, out=actual)
        assert actual.shape == expected.shape and actual.stride() == expected.stride()
        same(actual, expected)
    base_cpu, base = torch.zeros(2, 3), torch.zeros(2, 3, device=TPU)
    torch.arange(0, 4, out=base_cpu.narrow(1, 1, 2))
    torch.arange(0, 4, out=base.narrow(1, 1, 2))
    same(base, base_cpu)  # the view's own elements, in its row-major order
    with pytest.warns(UserWarning, match=r"will be resized to a tensor of shape \(4,\)"):
        torch.arange(0, 4, out=torch.zeros(7, device=TPU))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_uniform_bounds_are_checked_as_the_cpu_does(dtype):
    low, high = torch.finfo(torch.float).min, torch.finfo(torch.float).max
    for a, b in [(42, 0), (low, high), (low, 42), (-1e300, 0), (0, 70000.0), (-1, 1)]:
        try:
            torch.empty(5, dtype=dtype).uniform_(a, b)
        except RuntimeError as error:
            message = str(error).replace("c10::", "")  # the CPU names Half as c10::Half
            with pytest.raises(RuntimeError) as raised:
                torch.empty(5, dtype=dtype, device=TPU).uniform_(a, b)
            assert str(raised.value).replace("c10::", "").startswith(message.split("\n")[0])
            continue
        t = torch.empty(2000, dtype=dtype, device=TPU).uniform_(a, b).cpu().double()
        assert (t >= a).all() and (t <= b).all()


def test_ctc_loss_with_an_empty_target_last():
    """1-d targets: an empty target after all the others starts at the targets' end."""
    g = torch.Generator().manual_seed(0)
    for lengths in ([0, 9, 0], [9, 0, 0], [4, 0, 5], [0, 0, 0]):
        targets = torch.randint(1, 15, (sum(lengths),), generator=g)
        log_probs = torch.randn(50, 3, 15, dtype=torch.float64, generator=g).log_softmax(2)
        expected = torch.nn.functional.ctc_loss(
            log_probs, targets, [50] * 3, lengths, reduction="none"
        )
        actual = torch.nn.functional.ctc_loss(
            log_probs.to(TPU), targets.to(TPU), [50] * 3, lengths, reduction="none"
        )
        torch.testing.assert_close(actual.cpu(), expected)


def test_pow_of_a_scalar_into_an_out_tensor():
    """pow.Scalar_out had no tpu kernel: the CPU fallback refused a ComplexHalf result."""
    exponent = torch.tensor([0.0, 1.0, -1.5, 2.0, 0.25], dtype=torch.half)
    for base in (2.2 - 1.6j, 0.5j, 3.0):
        expected = torch.pow(base, exponent.to(torch.float32 if base == 3.0 else torch.complex64))
        out = torch.empty(0, dtype=torch.result_type(base, exponent), device=TPU)
        assert torch.pow(base, exponent.to(TPU), out=out) is out
        torch.testing.assert_close(out.cpu().to(expected.dtype), expected, rtol=2e-3, atol=2e-3)
    out = torch.empty(5, dtype=torch.float32, device=TPU)
    torch.pow(2, torch.arange(5.0, device=TPU), out=out)
    same(out, torch.pow(2, torch.arange(5.0)))


INF = float("inf")
EXTREMES = [INF, -INF, NAN, 0.0, -1.5, 2.0]


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_exp_of_complex_infinities_and_nan(dtype):
    """exp(-inf + i y) is 0 for an infinite or NaN y too (XLA made NaN of it)."""
    z = torch.tensor([complex(re, im) for re in EXTREMES for im in EXTREMES], dtype=dtype)
    torch.testing.assert_close(torch.exp(z.to(TPU)).cpu(), torch.exp(z), equal_nan=True)


def extremal_pairs(dtype):
    """Every (a, b) with a and b complex numbers built from EXTREMES, and random ones."""
    values = torch.tensor([complex(re, im) for re in EXTREMES for im in EXTREMES], dtype=dtype)
    a, b = torch.meshgrid(values, values, indexing="ij")
    g = torch.Generator().manual_seed(0)
    noise = [torch.randn(64, dtype=dtype, generator=g) * 10000 for _ in range(2)]
    return torch.cat([a.flatten(), *noise[:1]]), torch.cat([b.flatten(), *noise[1:]])


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_logaddexp_of_complex_numbers(dtype):
    a, b = extremal_pairs(dtype)
    torch.testing.assert_close(
        torch.logaddexp(a.to(TPU), b.to(TPU)).cpu(), torch.logaddexp(a, b), equal_nan=True
    )
    with pytest.raises(NotImplementedError, match="not implemented for 'ComplexHalf'"):
        torch.logaddexp(*(torch.ones(2, dtype=torch.complex32, device=TPU) for _ in range(2)))
    with pytest.raises(NotImplementedError, match="logaddexp2_cpu.* not implemented for 'Complex"):
        torch.logaddexp2(a.to(TPU), b.to(TPU))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_sgn_and_abs_of_large_complex_numbers(dtype):
    """|z| as re^2 + im^2 overflowed float32 from 2^64 on: sgn gave 0 and abs inf."""
    big = torch.finfo(torch.float32 if dtype == torch.complex64 else torch.float64).max / 4
    parts = [big, -big, 1e20, -3e25, 1e-30, 0.0, 2.0, INF, NAN]
    z = torch.tensor([complex(re, im) for re in parts for im in parts], dtype=dtype)
    for op in (torch.sgn, torch.abs):
        torch.testing.assert_close(op(z.to(TPU)).cpu(), op(z), equal_nan=True)


@pytest.mark.parametrize("qdtype", [torch.quint8, torch.qint8, torch.qint32], ids=str)
def test_quantized_tensors_on_tpu(qdtype):
    """Quantized tpu tensors had no kernels at all (not even _empty_affine_quantized)."""
    x = torch.randn(3, 4, 5)
    expected = torch.quantize_per_tensor(x, 0.1, 5, qdtype)
    q = torch.quantize_per_tensor(x.to(TPU), 0.1, 5, qdtype)
    assert q.device.type == TPU and q.dtype == qdtype and q.is_quantized
    assert (q.q_scale(), q.q_zero_point(), q.qscheme()) == (0.1, 5, torch.per_tensor_affine)
    same(q.int_repr(), expected.int_repr())
    same(q.dequantize(), expected.dequantize())
    for view in (lambda t: t.flatten(), lambda t: t.flatten(1, 2), lambda t: t.view(12, 5),
                 lambda t: t.transpose(0, 2), lambda t: t[1:, ::2], lambda t: t.unsqueeze(1)):  # fmt: skip
        same(view(q).int_repr(), view(expected).int_repr())
    for dims in ([0], [1, 2], [-1]):
        same(q.flip(dims).int_repr(), expected.flip(dims).int_repr())
    same(expected.to(TPU).int_repr(), expected.int_repr())
    torch.testing.assert_close(q.cpu(), expected)
    empty = torch._empty_affine_quantized([2, 3], scale=2, zero_point=3, dtype=qdtype, device=TPU)
    assert empty.shape == (2, 3) and empty.q_scale() == 2 and empty.flatten().shape == (6,)
    out = torch._empty_affine_quantized(
        [3, 4, 5], scale=0.1, zero_point=5, dtype=qdtype, device=TPU
    )
    out.copy_(x.to(TPU))  # a float source is quantized with out's quantizer, as on the CPU
    same(out.int_repr(), expected.int_repr())
    with pytest.raises(RuntimeError, match="please use dequantize"):
        torch.empty(3, 4, 5, device=TPU).copy_(q)
