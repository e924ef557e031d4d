"""Copies between CPU and tpu (and between tpu devices), dtype conversion, reading values back,
printing, and factory functions, each compared against CPU PyTorch computing the same thing."""

import re

import pytest
import torch

import torch_tpu  # noqa: F401

TPU = torch.device("tpu")

pytestmark = pytest.mark.filterwarnings(
    "ignore:The operator .* has no native tpu lowering",
    "ignore:Casting complex values to real discards the imaginary part",
)

DTYPES = [
    torch.float32,
    torch.float64,
    torch.bfloat16,
    torch.float16,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
    torch.complex64,
]
DTYPE_IDS = [str(d).replace("torch.", "") for d in DTYPES]


def sample(dtype, shape=(3, 5), seed=0):
    """Deterministic CPU values of `dtype` (signed values where the dtype allows)."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    if dtype == torch.bool:
        return (torch.randint(0, 2, (n,), generator=g) == 1).reshape(shape)
    if dtype == torch.uint8:
        return torch.randint(0, 256, (n,), generator=g).to(dtype).reshape(shape)
    if dtype == torch.int8:
        return torch.randint(-128, 128, (n,), generator=g).to(dtype).reshape(shape)
    if dtype in (torch.int16, torch.int32, torch.int64):
        hi = {torch.int16: 2**15, torch.int32: 2**31, torch.int64: 2**62}[dtype]
        v = torch.randint(-1000, 1000, (n,), generator=g, dtype=torch.int64)
        v[0] = hi - 1
        if n > 1:
            v[1] = -hi
        return v.to(dtype).reshape(shape)
    if dtype.is_complex:
        return (
            torch.complex(torch.randn(n, generator=g), torch.randn(n, generator=g))
            .to(dtype)
            .reshape(shape)
        )
    return (torch.randn(n, generator=g, dtype=torch.float64) * 100).to(dtype).reshape(shape)


def assert_equal(tpu_or_cpu, expected, msg=None):
    got = tpu_or_cpu.cpu() if tpu_or_cpu.device.type == "tpu" else tpu_or_cpu
    assert got.dtype == expected.dtype, f"dtype {got.dtype} != {expected.dtype}"
    assert got.shape == expected.shape, f"shape {tuple(got.shape)} != {tuple(expected.shape)}"
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True, msg=msg)


def assert_on(t, index=0):
    assert t.device.type == "tpu", t.device
    assert t.device.index == index, f"expected tpu:{index}, got {t.device}"


# -------------------------------------------------------------------- round trips per dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_cpu_to_tpu_to_cpu(dtype):
    c = sample(dtype)
    t = c.to(TPU)
    assert_on(t)
    assert t.dtype == dtype and t.shape == c.shape and t.stride() == c.stride()
    back = t.cpu()
    assert back.device.type == "cpu"
    assert_equal(back, c)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_tensor_constructor_on_tpu(dtype):
    c = sample(dtype, (4,))
    t = torch.tensor(c.tolist(), dtype=dtype, device=TPU)
    assert_on(t)
    assert_equal(t, torch.tensor(c.tolist(), dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_tpu_to_tpu_same_device(dtype):
    c = sample(dtype)
    t = c.to(TPU)
    d = torch.empty_like(t)
    d.copy_(t)
    assert d.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    assert_equal(d, c)
    cl = t.clone()
    assert_equal(cl, c)
    # the source is still intact and independent of the copies
    d.zero_()
    assert_equal(t, c)
    assert_equal(cl, c)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_tpu0_to_tpu1(dtype):
    assert torch.tpu.device_count() >= 2
    c = sample(dtype)
    t0 = c.to("tpu:0")
    t1 = t0.to("tpu:1")
    assert_on(t0, 0)
    assert_on(t1, 1)
    assert_equal(t1, c)
    t3 = t1.to("tpu:3")
    assert_on(t3, 3)
    assert_equal(t3, c)
    # copy_ into an existing tensor on another device
    d = torch.zeros(c.shape, dtype=dtype, device="tpu:2")
    d.copy_(t0)
    assert_on(d, 2)
    assert_equal(d, c)


def test_cpu_to_tpu_index_1_direct():
    c = sample(torch.float32)
    t = c.to("tpu:1")
    assert_on(t, 1)
    assert_equal(t, c)
    assert_equal(torch.ones(3, device="tpu:1"), torch.ones(3))
    assert_on(torch.ones(3, device="tpu:1"), 1)


def test_ops_on_tpu1_stay_on_tpu1():
    c = sample(torch.float32)
    t = c.to("tpu:1")
    r = t + 1
    assert_on(r, 1)
    assert_equal(r, c + 1)
    t.mul_(2)
    assert_equal(t, c * 2)


def test_print_tensor_on_tpu1():
    c = torch.tensor([1.5, -2.0, 3.25])
    t = c.to("tpu:1")
    assert str(t) == str(c)[:-1] + ", device='tpu:1')"


def test_cross_device_copy_into_view():
    c = torch.zeros(4, 6)
    src = torch.arange(6.0).reshape(2, 3)
    t = c.to("tpu:1")
    t[1:3, ::2].copy_(src.to("tpu:0"))
    c[1:3, ::2].copy_(src)
    assert_on(t, 1)
    assert_equal(t, c)


# --------------------------------------------------------------------- non-contiguous sources


NONCONTIG = {
    "transposed": lambda x: x.t(),
    "step_slice": lambda x: x[::2, 1::2],
    "expanded": lambda x: x[:, :1].expand(3, 4),
    "select_col": lambda x: x[:, 3],
    "offset_rows": lambda x: x[1:],
}


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("kind", list(NONCONTIG))
def test_noncontiguous_cpu_to_tpu(kind, dtype):
    c = NONCONTIG[kind](sample(dtype, (3, 5)))
    t = c.to(TPU)
    assert t.shape == c.shape
    assert_equal(t, c.contiguous())


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("kind", list(NONCONTIG))
def test_noncontiguous_tpu_to_cpu(kind, dtype):
    c = sample(dtype, (3, 5))
    t = NONCONTIG[kind](c.to(TPU))
    expected = NONCONTIG[kind](c)
    assert t.stride() == expected.stride()
    assert_equal(t.cpu(), expected.contiguous())


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16, torch.uint8], ids=str
)
@pytest.mark.parametrize("kind", list(NONCONTIG))
def test_noncontiguous_tpu_to_tpu(kind, dtype):
    c = sample(dtype, (3, 5))
    t = NONCONTIG[kind](c.to(TPU))
    expected = NONCONTIG[kind](c)
    cont = t.contiguous()
    assert cont.is_contiguous()
    assert_equal(cont, expected.contiguous())
    d = torch.zeros(expected.shape, dtype=dtype, device=TPU)
    d.copy_(t)
    assert_equal(d, expected.contiguous())


@pytest.mark.parametrize("kind", list(NONCONTIG))
def test_cpu_into_noncontiguous_tpu_destination(kind):
    base_c = sample(torch.float32, (3, 5))
    base_t = base_c.to(TPU)
    if kind == "expanded":  # writing into an expanded view is rejected by PyTorch
        src = torch.ones(3, 4)
        with pytest.raises(RuntimeError):
            NONCONTIG[kind](base_c).copy_(src)
        with pytest.raises(RuntimeError):
            NONCONTIG[kind](base_t).copy_(src)
        assert_equal(base_t, base_c)
        return
    src = sample(torch.float32, tuple(NONCONTIG[kind](base_c).shape), seed=1)
    NONCONTIG[kind](base_c).copy_(src)
    NONCONTIG[kind](base_t).copy_(src)
    assert_equal(base_t, base_c)


def test_cpu_noncontiguous_into_tpu_noncontiguous():
    src = sample(torch.float32, (5, 3), seed=2).t()  # (3,5), transposed
    c = torch.zeros(6, 5)
    t = c.to(TPU)
    c[::2].copy_(src)
    t[::2].copy_(src)
    assert_equal(t, c)


def test_tpu_noncontiguous_into_cpu_noncontiguous():
    src_c = sample(torch.float32, (5, 3), seed=3)
    src_t = src_c.to(TPU)
    c = torch.zeros(3, 10)
    d = torch.zeros(3, 10)
    c[:, 1::2].copy_(src_c.t())
    d[:, 1::2].copy_(src_t.t())
    assert_equal(d, c)


# -------------------------------------------------------------------------- dtype conversion


CONV_DTYPES = DTYPES


def conversion_source(dtype):
    """Values that every target dtype represents without undefined behaviour."""
    if dtype == torch.bool:
        return torch.tensor([True, False, True, True, False, False])
    if dtype.is_complex:
        return torch.tensor([0, 1.5 - 2j, 2.25 + 1j, 7 + 0j, 100.75 - 3j, 0.5j], dtype=dtype)
    if dtype.is_floating_point:
        return torch.tensor([0.0, 1.5, 2.75, 7.0, 100.25, 0.5], dtype=dtype)
    return torch.tensor([0, 1, 2, 7, 100, 127], dtype=dtype)


@pytest.mark.parametrize("dst", CONV_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("src", CONV_DTYPES, ids=DTYPE_IDS)
def test_to_device_and_dtype_from_cpu(src, dst):
    c = conversion_source(src)
    t = c.to(TPU, dst)
    assert t.dtype == dst
    assert_equal(t, c.to(dst))


@pytest.mark.parametrize("dst", CONV_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("src", CONV_DTYPES, ids=DTYPE_IDS)
def test_to_dtype_on_tpu(src, dst):
    c = conversion_source(src)
    t = c.to(TPU).to(dst)
    assert_on(t)
    assert_equal(t, c.to(dst))


@pytest.mark.parametrize("dst", [torch.float64, torch.int32, torch.bool, torch.bfloat16], ids=str)
@pytest.mark.parametrize("src", [torch.float32, torch.int64, torch.uint8, torch.float16], ids=str)
def test_to_cpu_and_dtype_from_tpu(src, dst):
    c = conversion_source(src)
    r = c.to(TPU).to("cpu", dst)
    assert r.device.type == "cpu"
    assert_equal(r, c.to(dst))


@pytest.mark.parametrize(
    "src,dst",
    [
        (torch.int64, torch.float32),
        (torch.float32, torch.int32),
        (torch.float64, torch.float16),
        (torch.int32, torch.bool),
        (torch.bool, torch.float32),
        (torch.float32, torch.bfloat16),
        (torch.uint8, torch.int8),
    ],
    ids=str,
)
def test_copy_between_dtypes(src, dst):
    c = conversion_source(src)
    expected = torch.zeros(6, dtype=dst).copy_(c)
    # tpu <- tpu
    d = torch.zeros(6, dtype=dst, device=TPU)
    d.copy_(c.to(TPU))
    assert_equal(d, expected)
    # tpu <- cpu
    d2 = torch.zeros(6, dtype=dst, device=TPU)
    d2.copy_(c)
    assert_equal(d2, expected)
    # cpu <- tpu
    h = torch.zeros(6, dtype=dst)
    h.copy_(c.to(TPU))
    assert_equal(h, expected)
    # into a strided view of a bigger tpu tensor
    big_c = torch.ones(12, dtype=dst)
    big_t = big_c.to(TPU)
    big_c[::2].copy_(c)
    big_t[::2].copy_(c.to(TPU))
    assert_equal(big_t, big_c)


def test_float_to_int_truncates_toward_zero():
    c = torch.tensor([-2.75, -1.5, -0.5, 0.5, 1.5, 2.99, -100.9])
    for dst in (torch.int8, torch.int16, torch.int32, torch.int64):
        assert_equal(c.to(TPU).to(dst), c.to(dst))


def test_int_narrowing_wraps_like_cpu():
    c = torch.tensor([300, -1, -129, 128, 65535, 70000, -70000], dtype=torch.int32)
    for dst in (torch.int8, torch.uint8, torch.int16):
        assert_equal(c.to(TPU).to(dst), c.to(dst))
        assert_equal(c.to(TPU, dst), c.to(dst))


def test_float32_to_half_and_bfloat16_rounding():
    c = torch.tensor([1.0 + 2**-9, 1.0 + 3 * 2**-9, 65504.0, 70000.0, 1e-8, -3.3e38, 1 / 3])
    for dst in (torch.float16, torch.bfloat16):
        assert_equal(c.to(TPU).to(dst), c.to(dst))
        assert_equal(c.to(TPU, dst), c.to(dst))


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=str
)
def test_special_float_values_round_trip(dtype):
    tiny = torch.finfo(dtype).tiny
    c = torch.tensor(
        [
            float("inf"),
            float("-inf"),
            float("nan"),
            -0.0,
            0.0,
            tiny,
            tiny / 4,
            -tiny / 2,
            torch.finfo(dtype).max,
        ],
        dtype=dtype,
    )
    t = c.to(TPU)
    back = t.cpu()
    assert_equal(back, c)
    assert torch.equal(torch.signbit(back), torch.signbit(c)), "sign of -0.0 lost"
    # through a device-side copy as well (a strided read runs a program)
    back2 = t.clone().cpu()
    assert_equal(back2, c)
    assert torch.equal(torch.signbit(back2), torch.signbit(c))
    back3 = t.expand(2, len(c))[1].contiguous().cpu()
    assert_equal(back3, c)
    assert torch.equal(torch.signbit(back3), torch.signbit(c))


# --------------------------------------------------------------------------------- non_blocking


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.bool], ids=str)
def test_non_blocking_both_ways(dtype):
    c = sample(dtype, (64, 33))
    t = c.to(TPU, non_blocking=True)
    r = t.to("cpu", non_blocking=True)
    torch.tpu.synchronize()
    assert_equal(r, c)
    # a non-contiguous source, and an in-place change right after the async upload
    t2 = c.t().to(TPU, non_blocking=True)
    if dtype == torch.bool:
        t2.logical_not_()
        expected = c.t().logical_not()
    else:
        t2.add_(1)
        expected = c.t() + 1
    r2 = t2.cpu()
    assert_equal(r2, expected)
    # copy_ with non_blocking into existing tensors
    h = torch.empty_like(c)
    h.copy_(t, non_blocking=True)
    torch.tpu.synchronize()
    assert_equal(h, c)
    d = torch.empty(c.shape, dtype=dtype, device=TPU)
    d.copy_(c, non_blocking=True)
    assert_equal(d, c)


def test_non_blocking_source_mutated_after_upload():
    # CPU source modified right after a non_blocking upload: tpu must hold the old values
    # (PyTorch semantics for non-pinned memory: the copy behaves as if synchronous).
    c = torch.arange(1000.0)
    expected = c.clone()
    t = c.to(TPU, non_blocking=True)
    c.fill_(-1)
    torch.tpu.synchronize()
    assert_equal(t, expected)


def asynchronous_copies() -> int:
    return torch_tpu.metrics.snapshot()["asynchronous_copies"]


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_non_blocking_with_pinned_memory_is_asynchronous_and_synchronize_waits(mode):
    # As on CUDA: with pinned host memory, non_blocking=True returns before the data has
    # moved (the copy is PJRT's transfer, counted in the metrics), and the values are there
    # once torch.tpu.synchronize() or an event recorded after the copy says so.
    c = sample(torch.float32, (256, 129))
    with torch_tpu.eager_mode(mode):
        before = asynchronous_copies()
        t = c.pin_memory().to(TPU, non_blocking=True)
        r = (t * 2).to("cpu", non_blocking=True)  # PyTorch gives this a pinned destination
        assert r.is_pinned()
        torch.tpu.synchronize()
        assert asynchronous_copies() == before + 2
        assert_equal(r, c * 2)
        h = torch.empty_like(c).pin_memory()
        h.copy_(t + 1, non_blocking=True)
        event = torch.tpu.Event()
        event.record()
        event.synchronize()
        assert event.query()
        assert_equal(h, c + 1)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_an_in_place_op_right_after_a_non_blocking_download_waits_for_it(mode):
    # The op reuses the source's buffer (donation): the copy must have read it first.
    # (Integer values: x * 2 + 1 is exact, fused or not.)
    c = torch.randint(-1000, 1000, (2048, 1024)).float()
    expected = c.clone()
    with torch_tpu.eager_mode(mode):
        t = c.to(TPU)
        for _ in range(6):
            h = torch.empty_like(c).pin_memory()
            h.copy_(t, non_blocking=True)
            t.mul_(2).add_(1)
            torch.tpu.synchronize()
            assert_equal(h, expected)
            expected.mul_(2).add_(1)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_copies_of_the_same_pinned_memory_run_in_order(mode):
    # As on CUDA's one stream: an upload from pinned memory a download still writes reads
    # what the download wrote, and a download into memory an upload still reads waits.
    a = torch.randint(-1000, 1000, (1024, 1024)).float()
    b = torch.randint(-1000, 1000, (1024, 1024)).float()
    with torch_tpu.eager_mode(mode):
        ta, tb = a.to(TPU), b.to(TPU)
        staging = torch.empty_like(a).pin_memory()
        for _ in range(3):
            staging.copy_(ta * 2, non_blocking=True)
            up = staging.to(TPU, non_blocking=True)
            staging.copy_(tb, non_blocking=True)  # waits for the upload reading it
            torch.tpu.synchronize()
            assert_equal(up, a * 2)
            assert_equal(staging, b)


def test_non_blocking_keeps_the_memory_of_a_copy_in_flight():
    # The pinned source of an upload and the pinned destination of a download may be let
    # go of right after the call: the copy holds them until it lands.
    c = sample(torch.float32, (512, 257))
    pinned = c.pin_memory()
    t = pinned.to(TPU, non_blocking=True)
    del pinned
    assert_equal(t + 0, c)
    for _ in range(4):
        h = torch.empty(c.shape).pin_memory()
        h.copy_(t, non_blocking=True)
        del h
    torch.tpu.synchronize()
    assert_equal(t, c)


def test_non_blocking_with_pageable_memory_or_a_conversion_is_synchronous():
    # Pageable memory may change or go right after the call (PyTorch copies it at once),
    # and a copy that converts or rearranges is not one transfer: all stay synchronous.
    c = sample(torch.float32, (64, 33))
    before = asynchronous_copies()
    t = c.to(TPU, non_blocking=True)
    h = torch.empty_like(c)
    h.copy_(t, non_blocking=True)
    assert_equal(h, c)
    d = torch.empty(c.shape, dtype=torch.float64).pin_memory()
    d.copy_(t, non_blocking=True)  # a dtype conversion
    assert_equal(d, c.double())
    s = torch.empty(c.t().shape).pin_memory()
    s.copy_(t.t(), non_blocking=True)  # sizes differ from the storage's: a contiguous copy first
    torch.tpu.synchronize()
    assert_equal(s, c.t())
    assert asynchronous_copies() == before + 1  # only the last one moved asynchronously


# ------------------------------------------------------------------------------ item, tolist


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_item(dtype):
    c = sample(dtype, (4,))
    t = c.to(TPU)
    for i in range(4):
        got, want = t[i].item(), c[i].item()
        assert type(got) is type(want)
        assert got == want
    got0d = c[2].clone().to(TPU).item()
    assert got0d == c[2].item()
    assert t[1:2].item() == c[1:2].item()  # one-element 1-D tensor


def test_item_rejects_many_elements():
    with pytest.raises(RuntimeError):
        torch.ones(2).item()
    with pytest.raises(RuntimeError):
        torch.ones(2, device=TPU).item()


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_tolist(dtype):
    c = sample(dtype, (3, 4))
    t = c.to(TPU)
    assert t.tolist() == c.tolist()
    assert t.t().tolist() == c.t().tolist()
    assert t[1].tolist() == c[1].tolist()
    assert t[1, 2].tolist() == c[1, 2].tolist()


# ---------------------------------------------------------------------------- print / repr


def _strip_device(s, index=0):
    """Drops the device suffix and normalises how the remaining suffixes wrap."""
    s = re.sub(rf",\s*device='tpu:{index}'", "", s)
    return re.sub(r",\s*\n\s*(?=[a-z])", ", ", s)


PRINT_CASES = {
    "float32": lambda: torch.tensor([[1.5, -2.0, 3.25], [0.0, 1e-3, 7.0]]),
    "float32_sci": lambda: torch.tensor([1e-8, 1.0, 1e8]),
    "float32_int_valued": lambda: torch.tensor([1.0, 2.0, -3.0]),
    "float32_nan_inf": lambda: torch.tensor([float("nan"), float("inf"), -float("inf"), 1.5]),
    "float64": lambda: torch.tensor([1 / 3, 2.0], dtype=torch.float64),
    "bfloat16": lambda: torch.tensor([1.5, -2.25, 100.0], dtype=torch.bfloat16),
    "float16": lambda: torch.tensor([0.1, 2.5], dtype=torch.float16),
    "int64": lambda: torch.tensor([[1, -2], [300, 4]]),
    "int32": lambda: torch.tensor([5, 6, 7], dtype=torch.int32),
    "int8": lambda: torch.tensor([-128, 127], dtype=torch.int8),
    "uint8": lambda: torch.tensor([0, 255], dtype=torch.uint8),
    "int16": lambda: torch.tensor([1000, -1000], dtype=torch.int16),
    "bool": lambda: torch.tensor([True, False, True]),
    "complex64": lambda: torch.tensor([1 + 2j, -0.5j], dtype=torch.complex64),
    "zero_dim": lambda: torch.tensor(3.5),
    "zero_dim_int": lambda: torch.tensor(-4),
    "empty": lambda: torch.empty(0),
    "empty_2d": lambda: torch.zeros(0, 3),
    "empty_int": lambda: torch.zeros(2, 0, dtype=torch.int32),
    "summarized": lambda: torch.arange(3000.0).reshape(30, 100) / 7,
    "summarized_int": lambda: torch.arange(2000).reshape(2, 1000),
    "noncontig": lambda: (torch.arange(12.0).reshape(3, 4) * 0.5).t()[:, ::2],
}


@pytest.mark.parametrize("name", list(PRINT_CASES))
def test_str_and_repr(name):
    c = PRINT_CASES[name]()
    t = c.to(TPU)
    s = str(t)
    assert "device='tpu:0'" in s
    assert _strip_device(s) == _strip_device(str(c))
    assert _strip_device(repr(t)) == _strip_device(repr(c))


def test_print_noncontiguous_view_of_tpu_tensor():
    c = torch.arange(20.0).reshape(4, 5) - 3
    t = c.to(TPU)
    assert _strip_device(str(t[1:, ::2].t())) == _strip_device(str(c[1:, ::2].t()))
    assert _strip_device(str(t.view(torch.int32)[0])) == _strip_device(str(c.view(torch.int32)[0]))


def test_format_and_python_scalars():
    c = torch.tensor(2.5)
    t = c.to(TPU)
    assert f"{t:.3f}" == f"{c:.3f}"
    assert float(t) == float(c) and int(t) == int(c) and bool(t) == bool(c)
    assert float(torch.tensor([7.25], device=TPU)) == 7.25


# ------------------------------------------------------------------- zero-element and 0-dim


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 4)], ids=str)
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.int64, torch.bool, torch.complex64], ids=str
)
def test_zero_element(shape, dtype):
    c = torch.zeros(shape, dtype=dtype)
    t = c.to(TPU)
    assert t.shape == c.shape and t.numel() == 0
    assert t.stride() == c.stride()
    assert_equal(t, c)
    assert_equal(torch.empty(shape, dtype=dtype, device=TPU), c)
    assert_equal(t.to(torch.float64), c.to(torch.float64))
    assert_equal(t.t() if t.dim() == 2 else t, c.t() if c.dim() == 2 else c)
    assert t.tolist() == c.tolist()
    d = torch.empty(shape, dtype=dtype, device=TPU)
    d.copy_(t)
    assert_equal(d, c)
    h = torch.empty(shape, dtype=dtype)
    h.copy_(t)
    assert_equal(h, c)
    assert t.untyped_storage().nbytes() == c.untyped_storage().nbytes()


def test_zero_element_slice_of_nonempty():
    c = torch.arange(12.0).reshape(3, 4)
    t = c.to(TPU)
    assert_equal(t[:, 2:2], c[:, 2:2])
    assert_equal(t[3:], c[3:])
    t[:, 2:2].fill_(5)
    assert_equal(t, c)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_zero_dim(dtype):
    c = sample(dtype, (1,)).reshape(())
    t = c.to(TPU)
    assert t.dim() == 0 and t.shape == torch.Size([]) and t.stride() == ()
    assert_equal(t, c)
    assert t.item() == c.item()
    assert t.tolist() == c.tolist()
    d = torch.zeros((), dtype=dtype, device=TPU)
    d.copy_(t)
    assert_equal(d, c)
    e = torch.zeros(2, 3, dtype=dtype, device=TPU)
    e.copy_(t)  # broadcast a 0-dim source
    assert_equal(e, c.expand(2, 3).contiguous())


def test_zero_dim_arithmetic_and_cpu_scalar():
    c = torch.tensor(3.5)
    t = c.to(TPU)
    assert_equal(t + 1, c + 1)
    v_c = torch.arange(4.0)
    v_t = v_c.to(TPU)
    # a CPU 0-dim tensor mixes with tpu tensors like a scalar
    assert_equal(v_t * torch.tensor(2.0), v_c * torch.tensor(2.0))
    assert_equal(v_t + t, v_c + c)


# --------------------------------------------------------------------------------- factories


FACTORY_DTYPES = [
    torch.float32,
    torch.float64,
    torch.bfloat16,
    torch.float16,
    torch.int8,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
    torch.complex64,
]


@pytest.mark.parametrize("dtype", FACTORY_DTYPES, ids=str)
def test_zeros_ones_full(dtype):
    for fn in (torch.zeros, torch.ones):
        t = fn(3, 4, dtype=dtype, device=TPU)
        assert_on(t)
        assert_equal(t, fn(3, 4, dtype=dtype))
    value = (
        True
        if dtype == torch.bool
        else (7 if not (dtype.is_floating_point or dtype.is_complex) else -2.5)
    )
    assert_equal(
        torch.full((2, 5), value, dtype=dtype, device=TPU), torch.full((2, 5), value, dtype=dtype)
    )
    assert_equal(torch.zeros((), dtype=dtype, device=TPU), torch.zeros((), dtype=dtype))


def test_full_default_dtype_inference():
    for value in (3, 2.5, True, 1 + 1j):
        t = torch.full((2, 2), value, device=TPU)
        c = torch.full((2, 2), value)
        assert_equal(t, c)


def test_full_int_value_into_float_and_float_into_int_dtype():
    assert_equal(
        torch.full((3,), 4, dtype=torch.float32, device=TPU),
        torch.full((3,), 4, dtype=torch.float32),
    )
    assert_equal(
        torch.full((3,), -1, dtype=torch.uint8, device=TPU), torch.full((3,), -1, dtype=torch.uint8)
    )
    big = 2**40 + 3
    assert_equal(
        torch.full((2,), big, dtype=torch.int64, device=TPU),
        torch.full((2,), big, dtype=torch.int64),
    )


ARANGE_CASES = {
    "int_end": (lambda **kw: torch.arange(10, **kw)),
    "int_start_end_step": (lambda **kw: torch.arange(3, 20, 4, **kw)),
    "int_negative_step": (lambda **kw: torch.arange(10, -5, -3, **kw)),
    "float_step": (lambda **kw: torch.arange(0, 1, 0.1, **kw)),
    "float_negative_step": (lambda **kw: torch.arange(2.5, -1.0, -0.25, **kw)),
    "float_args_int_values": (lambda **kw: torch.arange(1.0, 9.0, **kw)),
    "float64": (lambda **kw: torch.arange(-1, 1, 0.125, dtype=torch.float64, **kw)),
    "int32": (lambda **kw: torch.arange(-7, 7, 2, dtype=torch.int32, **kw)),
    "uint8": (lambda **kw: torch.arange(250, 256, dtype=torch.uint8, **kw)),
    "bfloat16": (lambda **kw: torch.arange(0, 8, 0.5, dtype=torch.bfloat16, **kw)),
    "large_int64": (lambda **kw: torch.arange(2**40, 2**40 + 10, 3, **kw)),
    "empty": (lambda **kw: torch.arange(5, 5, **kw)),
    "long_float": (lambda **kw: torch.arange(0, 10000, 0.7, **kw)),
}


@pytest.mark.parametrize("name", list(ARANGE_CASES))
def test_arange(name):
    fn = ARANGE_CASES[name]
    c = fn()
    t = fn(device=TPU)
    assert_on(t)
    assert t.dtype == c.dtype and t.shape == c.shape
    if c.is_floating_point():
        torch.testing.assert_close(t.cpu(), c)  # float arange may differ in the last ulp
    else:
        assert_equal(t, c)


def test_arange_out_into_tpu_tensor():
    c = torch.empty(0)
    t = torch.empty(0, device=TPU)
    torch.arange(4, -4, -1.5, out=c)
    torch.arange(4, -4, -1.5, out=t)
    assert t.shape == c.shape
    torch.testing.assert_close(t.cpu(), c)


EYE_CASES = {
    "n1": lambda **kw: torch.eye(1, **kw),
    "n4": lambda **kw: torch.eye(4, **kw),
    "n3_m5": lambda **kw: torch.eye(3, 5, **kw),
    "n5_m2": lambda **kw: torch.eye(5, 2, **kw),
    "n0": lambda **kw: torch.eye(0, **kw),
    "n3_m0": lambda **kw: torch.eye(3, 0, **kw),
    "int64": lambda **kw: torch.eye(3, dtype=torch.int64, **kw),
    "bool": lambda **kw: torch.eye(2, 3, dtype=torch.bool, **kw),
    "bfloat16": lambda **kw: torch.eye(4, 3, dtype=torch.bfloat16, **kw),
    "complex64": lambda **kw: torch.eye(3, dtype=torch.complex64, **kw),
}


@pytest.mark.parametrize("name", list(EYE_CASES))
def test_eye(name):
    fn = EYE_CASES[name]
    t = fn(device=TPU)
    assert_on(t)
    assert_equal(t, fn())


def test_eye_out_into_view_and_on_tpu1():
    assert_equal(torch.eye(3, device="tpu:1"), torch.eye(3))
    assert_on(torch.eye(3, device="tpu:1"), 1)


@pytest.mark.parametrize("dtype", FACTORY_DTYPES, ids=str)
def test_empty_then_fill_(dtype):
    value = False if dtype == torch.bool else 3
    t = torch.empty(2, 3, dtype=dtype, device=TPU)
    assert t.shape == (2, 3) and t.dtype == dtype and t.is_contiguous()
    t.fill_(value)
    assert_equal(t, torch.full((2, 3), value, dtype=dtype))
    t[1].fill_(torch.tensor(1, dtype=dtype, device=TPU) if dtype != torch.bool else True)
    c = torch.full((2, 3), value, dtype=dtype)
    c[1].fill_(torch.tensor(1, dtype=dtype) if dtype != torch.bool else True)
    assert_equal(t, c)


def test_fill_with_cpu_zero_dim_tensor_and_out_of_range_float():
    t = torch.empty(4, device=TPU)
    c = torch.empty(4)
    t.fill_(torch.tensor(2.5))
    c.fill_(torch.tensor(2.5))
    assert_equal(t, c)
    ti = torch.empty(3, dtype=torch.int32, device=TPU)
    ci = torch.empty(3, dtype=torch.int32)
    ti.fill_(-7.9)
    ci.fill_(-7.9)
    assert_equal(ti, ci)


def test_empty_strided_and_empty_like_preserve_strides():
    t = torch.empty_strided((2, 3), (1, 2), device=TPU)
    c = torch.empty_strided((2, 3), (1, 2))
    assert t.stride() == c.stride()
    assert t.untyped_storage().nbytes() == c.untyped_storage().nbytes()
    tl = torch.empty_like(torch.zeros(4, 5, device=TPU).t())
    cl = torch.empty_like(torch.zeros(4, 5).t())
    assert tl.stride() == cl.stride()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16], ids=str)
def test_like_factories(dtype):
    c = sample(dtype, (3, 4))
    t = c.to(TPU)
    assert_equal(torch.zeros_like(t), torch.zeros_like(c))
    assert_equal(torch.ones_like(t), torch.ones_like(c))
    value = True if dtype == torch.bool else 5
    assert_equal(torch.full_like(t, value), torch.full_like(c, value))
    assert_on(torch.zeros_like(t))
    # with a dtype override, and from a non-contiguous source (preserve_format keeps strides)
    assert_equal(torch.ones_like(t, dtype=torch.float64), torch.ones_like(c, dtype=torch.float64))
    zt, zc = torch.full_like(t.t(), value), torch.full_like(c.t(), value)
    assert zt.stride() == zc.stride()
    assert_equal(zt, zc)
    # the source is untouched
    assert_equal(t, c)


def test_like_factories_on_tpu1():
    t = torch.ones(3, device="tpu:1")
    for r in (
        torch.zeros_like(t),
        torch.ones_like(t),
        torch.full_like(t, 2.0),
        torch.empty_like(t),
    ):
        assert_on(r, 1)
    assert_equal(torch.full_like(t, 2.0), torch.full((3,), 2.0))


def test_factory_default_device_index():
    t = torch.zeros(2, device="tpu")
    assert str(t.device) == "tpu:0"
    assert re.search(r"device='tpu:0'", repr(t))
