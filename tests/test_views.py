"""Views, in-place writes through views, and storage-changing ops on tpu, checked against CPU.

Every case runs the same function on a CPU tensor and on its tpu copy, then compares every
returned tensor and every (possibly mutated) input: values, shape, strides, storage_offset,
is_contiguous, dtype, and which of them share a storage.
"""

import pytest
import torch

import torch_tpu  # noqa: F401

TPU = torch.device("tpu")

pytestmark = pytest.mark.filterwarnings(
    "ignore:The operator .* has no native tpu lowering", "ignore:TypedStorage is deprecated"
)


# ----------------------------------------------------------------------------------- helpers


def _as_list(out):
    if out is None:
        return []
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for t in out if isinstance(t, torch.Tensor)]


def assert_same_values(actual_tpu, expected_cpu, msg=""):
    """Exact value comparison (NaNs equal, -0.0 vs 0.0 distinguished for floats)."""
    assert actual_tpu.device.type == "tpu", f"{msg}: result is on {actual_tpu.device}"
    got = actual_tpu.cpu()
    assert got.dtype == expected_cpu.dtype, msg
    assert got.shape == expected_cpu.shape, msg
    if got.is_floating_point() or got.is_complex():
        torch.testing.assert_close(
            got, expected_cpu, rtol=0, atol=0, equal_nan=True, msg=msg or None
        )
    else:
        torch.testing.assert_close(got, expected_cpu, rtol=0, atol=0, msg=msg or None)


def assert_same_meta(t, c, what):
    assert t.dtype == c.dtype, f"{what}: dtype {t.dtype} != {c.dtype}"
    assert tuple(t.shape) == tuple(c.shape), f"{what}: shape {tuple(t.shape)} != {tuple(c.shape)}"
    assert t.stride() == c.stride(), f"{what}: stride {t.stride()} != {c.stride()}"
    assert t.storage_offset() == c.storage_offset(), (
        f"{what}: storage_offset {t.storage_offset()} != {c.storage_offset()}"
    )
    assert t.is_contiguous() == c.is_contiguous(), f"{what}: is_contiguous differs"
    assert t._is_view() == c._is_view(), f"{what}: _is_view differs"
    if t.dim() == 4:
        assert t.is_contiguous(memory_format=torch.channels_last) == c.is_contiguous(
            memory_format=torch.channels_last
        ), f"{what}: is_contiguous(channels_last) differs"


def _storage_key(t):
    return t.untyped_storage().data_ptr()


def check(fn, *inputs, compare_inputs=True):
    """Runs fn on CPU clones of `inputs` and on tpu copies; compares outputs and inputs."""
    cpu_in = [x.clone() for x in inputs]
    tpu_in = [x.to(TPU) for x in inputs]
    for t, c in zip(tpu_in, cpu_in):
        assert_same_meta(t, c, "input before fn")
    cpu_out = _as_list(fn(*cpu_in))
    tpu_out = _as_list(fn(*tpu_in))
    assert len(cpu_out) == len(tpu_out)
    for i, (t, c) in enumerate(zip(tpu_out, cpu_out)):
        assert_same_meta(t, c, f"output {i}")
    # Aliasing: which outputs/inputs share a storage, and the byte distance between data_ptrs.
    cpu_all, tpu_all = cpu_in + cpu_out, tpu_in + tpu_out
    for i in range(len(cpu_all)):
        for j in range(i + 1, len(cpu_all)):
            c_shared = _storage_key(cpu_all[i]) == _storage_key(cpu_all[j])
            t_shared = _storage_key(tpu_all[i]) == _storage_key(tpu_all[j])
            assert c_shared == t_shared, (
                f"storage sharing of tensors {i},{j}: tpu {t_shared} cpu {c_shared}"
            )
            if c_shared and cpu_all[i].numel() and cpu_all[j].numel():
                assert (tpu_all[i].data_ptr() - tpu_all[j].data_ptr()) == (
                    cpu_all[i].data_ptr() - cpu_all[j].data_ptr()
                ), f"data_ptr distance of tensors {i},{j}"
    for t, c in zip(tpu_all, cpu_all):
        assert t.untyped_storage().nbytes() == c.untyped_storage().nbytes()
    # Values (read after every write has happened).
    for i, (t, c) in enumerate(zip(tpu_out, cpu_out)):
        assert_same_values(t, c, f"output {i}")
    if compare_inputs:
        for i, (t, c) in enumerate(zip(tpu_in, cpu_in)):
            assert_same_values(t, c, f"input {i} after fn")
    return tpu_out, cpu_out


def m46(dtype=torch.float32):
    return torch.arange(24, dtype=dtype).reshape(4, 6)


def m234():
    return torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)


def sq(n=5):
    return torch.arange(n * n, dtype=torch.float32).reshape(n, n) - 7.5


def cplx():
    return torch.complex(torch.arange(6.0) - 2, torch.arange(6.0) * 0.5)


def vec(n=12):
    return torch.arange(n, dtype=torch.float32) * 1.5 - 4


# ----------------------------------------------------------------------------- read views

READ_CASES = {
    "view_2d": (lambda x: x.view(6, 4), m46),
    "view_flat": (lambda x: x.view(-1), m46),
    "view_3d": (lambda x: x.view(2, 3, 4), m46),
    "view_of_slice_rows": (lambda x: x[1:3].view(12), m46),
    "reshape_contig_alias": (lambda x: x.reshape(3, 8), m46),
    "reshape_noncontig_copy": (lambda x: x.t().reshape(-1), m46),
    "reshape_of_transposed_3d": (lambda x: x.permute(2, 0, 1).reshape(4, 6), m234),
    "as_strided_basic": (lambda x: x.as_strided((3, 3), (2, 1), 1), m46),
    "as_strided_transposed": (lambda x: x.as_strided((4, 3), (1, 4), 2), m46),
    "as_strided_overlapping": (lambda x: x.as_strided((4, 3), (1, 1)), vec),
    "as_strided_zero_stride": (lambda x: x.as_strided((3, 4), (0, 2), 1), vec),
    "as_strided_on_view_offset": (lambda x: x[1:].as_strided((2, 2), (3, 1), 5), m46),
    "as_strided_then_sum": (lambda x: x.as_strided((4, 3), (1, 1)).sum(0), vec),
    "transpose": (lambda x: x.transpose(0, 1), m46),
    "transpose_3d": (lambda x: x.transpose(0, 2), m234),
    "permute": (lambda x: x.permute(1, 2, 0), m234),
    "permute_4d_channels_last": (lambda x: x.view(1, 2, 3, 4).permute(0, 2, 3, 1), m234),
    "slice_step_rows": (lambda x: x[::2], m46),
    "slice_step_cols": (lambda x: x[:, 1::2], m46),
    "slice_step_both": (lambda x: x[1:4, ::3], m46),
    "slice_step_1d": (lambda x: x[2:11:4], vec),
    "slice_empty": (lambda x: x[2:2], m46),
    "select_row": (lambda x: x[1], m46),
    "select_col": (lambda x: x[:, 2], m46),
    "select_neg": (lambda x: x.select(1, -1), m46),
    "select_scalar": (lambda x: x[2, 3], m46),
    "narrow": (lambda x: x.narrow(1, 2, 3), m46),
    "narrow_dim0": (lambda x: x.narrow(0, 1, 2), m46),
    "expand_col": (lambda x: x[:, :1].expand(4, 5), m46),
    "expand_new_dim": (lambda x: x[0].expand(3, 6), m46),
    "expand_then_contiguous": (lambda x: x[:, 2:3].expand(4, 3).contiguous(), m46),
    "unsqueeze": (lambda x: x.unsqueeze(1), m46),
    "unsqueeze_last": (lambda x: x.unsqueeze(-1), m46),
    "squeeze_all": (lambda x: x.view(1, 4, 1, 6).squeeze(), m46),
    "squeeze_dim": (lambda x: x.view(1, 4, 1, 6).squeeze(2), m46),
    "unfold_1d": (lambda x: x.unfold(0, 3, 2), vec),
    "unfold_2d": (lambda x: x.unfold(1, 2, 1), m46),
    "unfold_step_gt_size": (lambda x: x.unfold(0, 2, 5), vec),
    "diagonal": (lambda x: x.diagonal(), sq),
    "diagonal_pos": (lambda x: x.diagonal(1), sq),
    "diagonal_neg": (lambda x: x.diagonal(-2), sq),
    "diagonal_rect": (lambda x: x.diagonal(2), m46),
    "diagonal_3d": (lambda x: x.diagonal(0, 1, 2), m234),
    "t": (lambda x: x.t(), m46),
    "t_1d": (lambda x: x.t(), vec),
    "T": (lambda x: x.T, m46),
    "mT": (lambda x: x.mT, m234),
    "mH_real": (lambda x: x.mH, m234),
    "view_dtype_f32_as_i32": (lambda x: x.view(torch.int32), sq),
    "view_dtype_f32_as_i16": (lambda x: x.view(torch.int16), sq),
    "view_dtype_f32_as_u8": (lambda x: x.view(torch.uint8), sq),
    "view_dtype_f32_as_bf16": (lambda x: x.view(torch.bfloat16), sq),
    "view_dtype_u8_as_f32": (lambda x: x.view(torch.uint8).view(torch.float32), sq),
    "view_dtype_f32_as_f64": (lambda x: x.view(torch.float64), m46),
    "view_dtype_i32_of_slice": (lambda x: x[1:3, 2:].view(torch.int32), m46),
    "view_dtype_i16_of_transposed_rows": (lambda x: x[1].view(torch.int16), m46),
    "view_as_real": (lambda x: torch.view_as_real(torch.view_as_complex(x.view(4, 3, 2))), m46),
    "view_dtype_u8_slice_as_i16": (lambda x: x.view(torch.uint8)[:, 2:10].view(torch.int16), sq),
    "view_dtype_i64_as_i32": (lambda x: x.view(torch.int32), lambda: m46(torch.int64) * -3),
    "view_dtype_f64_as_f32": (
        lambda x: x.view(torch.float32)[:, 1::2],
        lambda: m46(torch.float64) / 3,
    ),
    "view_as_complex": (lambda x: torch.view_as_complex(x.view(12, 2)), m46),
    "view_as_real_of_complex": (lambda x: torch.view_as_real(x)[1:, 1], cplx),
    "view_as_complex_values": (lambda x: torch.view_as_complex(x.view(12, 2)).abs(), m46),
    "chain_t_slice_unsqueeze_transpose": (
        lambda x: x.t()[1:, ::2].unsqueeze(0).transpose(0, 2),
        m46,
    ),
    "chain_view_slice_view": (lambda x: x.view(2, 12)[:, 3:9].unfold(1, 2, 2), m46),
    "chain_step_t_select_narrow": (lambda x: x[::2].t()[3].narrow(0, 1, 1), m46),
    "chain_permute_diagonal_expand": (
        lambda x: x.permute(2, 1, 0).diagonal(0, 1, 2)[1:].unsqueeze(1).expand(3, 2, 2),
        m234,
    ),
    "chain_dtype_view_then_slice": (lambda x: x.view(torch.int16)[:, 1::2], sq),
    "chain_unfold_diagonal": (lambda x: x.unfold(0, 4, 1).diagonal(), vec),
    "contiguous_of_view": (lambda x: x[:, 1::2].t().contiguous(), m46),
    "multiple_views_together": (lambda x: (x[1], x.t(), x[:, ::3], x.view(-1)[5:]), m46),
}


@pytest.mark.parametrize("name", list(READ_CASES))
def test_read_view(name):
    fn, make = READ_CASES[name]
    check(fn, make())


def test_view_of_tpu_tensor_is_tpu_and_aliases():
    c = m46().clone()
    x = c.to(TPU)
    makers = [
        lambda a: a.t(),
        lambda a: a[1],
        lambda a: a[:, ::2],
        lambda a: a.view(-1),
        lambda a: a.unfold(1, 2, 2),
        lambda a: a.diagonal(),
        lambda a: a.view(torch.int32),
    ]
    for make in makers:
        v, cv = make(x), make(c)
        assert v.device == x.device
        assert (v._base is x) == (cv._base is c)
        assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


# --------------------------------------------------------------------- writes through views


def _mul_cols(x):
    v = x[:, 1:3]
    v.mul_(2)
    return v


def _t_add(x):
    v = x.t()
    v.add_(1)
    return v, x[1]


def _diag_zero(x):
    d = x.diagonal()
    d.zero_()
    return d, x.t()


def _setitem_step(x, y):
    x[::2] = y
    return x[1::2]


def _setitem_row_scalar(x):
    r = x[1]
    x[1] = 5
    return r, x[:, 1]


def _ellipsis_fill(x):
    v = x[..., 0]
    v.fill_(3)
    return v


def _copy_into_view(x, y):
    v = x[1:3, ::2]
    v.copy_(y)
    return v, x.t()


def _copy_broadcast_into_view(x, y):
    x[:, 1].copy_(y)
    return x[:, 1]


def _copy_cpu_into_tpu_view(x):
    src = torch.arange(6, dtype=torch.float32).reshape(2, 3) * -1  # always a CPU tensor
    v = x[1:3, 1::2]
    v.copy_(src)
    return v


def _copy_view_into_view(x):
    x[0].copy_(x[:, 1].repeat(2)[:6])
    return x[0]


def _copy_int_into_float_view(x, y):
    x[::3, 2:5].copy_(y)
    return x


def _out_into_row(x, a, b):
    r = torch.add(a, b, out=x[0])
    return r, x[0], x[:, 0]


def _out_into_column(x, a, b):
    r = torch.mul(a, b, out=x[:, 2])
    return r, x.t()


def _out_into_diagonal(x, a, b):
    torch.sub(a, b, out=x.diagonal())
    return x.diagonal(), x


def _base_inplace_visible(x):
    v1, v2, v3, v4 = x[1:], x.t(), x.view(-1)[::5], x.view(torch.int32)
    x.add_(1)
    return v1, v2, v3, v4


def _base_mul_tensor_visible(x, y):
    v = x[:, ::2]
    x.mul_(y)
    return v


def _base_fill_visible(x):
    v = x.diagonal()
    x.fill_(-2)
    return v


def _base_zero_visible(x):
    v = x.unfold(1, 3, 3)
    x.zero_()
    return v


def _write_visible_in_overlapping_view(x):
    a, b = x[1:3], x[:, 2]
    a.zero_()
    return a, b


def _write_i32_view(x):
    xi = x.view(torch.int32)
    xi[0, :2] = 1065353216  # bit pattern of 1.0f
    xi[2, 3] = -1
    return xi, x[0]


def _write_i16_view(x):
    xs = x.view(torch.int16)
    xs[:, ::2].zero_()  # low halves
    return xs, x


def _write_u8_view(x):
    xb = x.view(torch.uint8)
    xb[..., 3] = 0x40  # top byte of every float
    return xb, x


def _write_bf16_view(x):
    xh = x.view(torch.bfloat16)
    xh[1:3, 1::2] = 2.5  # high halves of rows 1..2
    return x


def _write_float_see_in_int_view(x):
    xi = x.view(torch.int32)
    x[1, 1:4] = -0.0
    x[2].mul_(2)
    return xi


def _write_u8_slice_i16_view(x):
    v = x.view(torch.uint8)[:, 2:10].view(torch.int16)
    v.fill_(0x1234)
    return v, x


def _write_i64_as_i32(x):
    v = x.view(torch.int32)
    v[:, ::2] = 7  # low words (little-endian)
    return v, x


def _write_f64_as_f32(x):
    v = x.view(torch.float32)[1:3]
    v.mul_(-1)
    return v, x


def _write_as_strided(x):
    v = x.as_strided((2, 2), (6, 2), 1)
    v.add_(10)
    return v, x


def _write_chain(x):
    v = x.t()[1:, ::2].unsqueeze(0)
    v.mul_(3)
    return v, x


def _write_select_then_view(x):
    v = x[:, ::2]
    x[2].fill_(7)
    return v


def _add_broadcast_into_view(x):
    v = x[:, :2]
    v.add_(torch.tensor([1.0, 2.0], device=x.device))
    return v


def _setitem_block(x, y):
    x[1:3, 1:4] = y
    return x


def _iadd_step(x):
    x[::2, ::2] += 1
    return x


def _fill_permuted_3d(x):
    v = x.permute(2, 0, 1)[1:3]
    v.fill_(-1)
    return v, x


def _sub_div_views(x):
    x[:, 0].sub_(100)
    x[1:, 3].div_(4)
    return x


def _relu_view(x):
    v = x[:, 1::2]
    v.relu_()
    return v


def _inplace_on_unfold_view(x):
    v = x.unfold(1, 2, 2)  # non-overlapping windows
    v.mul_(-1)
    return v


def _inplace_on_expanded_source(x):
    x[0].copy_(x[3, :1].expand(6).clone())
    return x


def _write_1d_step(x):
    v = x[1::3]
    v.mul_(-2)
    return v, x


def _write_then_read_several(x):
    x[0, 0] = 100
    x.t()[1].add_(1)
    x.diagonal(1).mul_(2)
    return x[0], x.t(), x.diagonal()


def _src_is_other_view_of_same_base(x):
    x[:2].mul_(x[2:])
    x[0].copy_(x[3])
    x[:, 5].add_(x[:, 0])
    return x


def _scalar_view_setitem(x):
    s = x[2, 3]
    s.fill_(9)
    return s, x


WRITE_CASES = {
    "slice_cols_mul_": (_mul_cols, [m46]),
    "t_add_": (_t_add, [m46]),
    "diagonal_zero_": (_diag_zero, [sq]),
    "setitem_step_rows": (_setitem_step, [m46, lambda: -torch.arange(12.0).reshape(2, 6)]),
    "setitem_row_scalar": (_setitem_row_scalar, [m46]),
    "ellipsis_fill_": (_ellipsis_fill, [m234]),
    "copy_into_view": (_copy_into_view, [m46, lambda: torch.full((2, 3), -1.5)]),
    "copy_broadcast_into_view": (_copy_broadcast_into_view, [m46, lambda: torch.tensor(42.0)]),
    "copy_cpu_into_tpu_view": (_copy_cpu_into_tpu_view, [m46]),
    "copy_view_into_view": (_copy_view_into_view, [m46]),
    "copy_int_into_float_view": (
        _copy_int_into_float_view,
        [m46, lambda: torch.tensor([[7, -8, 9], [10, 11, -12]], dtype=torch.int64)],
    ),
    "out_into_row": (
        _out_into_row,
        [m46, lambda: torch.arange(6.0), lambda: torch.full((6,), 0.5)],
    ),
    "out_into_column": (
        _out_into_column,
        [m46, lambda: torch.arange(4.0), lambda: torch.full((4,), -3.0)],
    ),
    "out_into_diagonal": (
        _out_into_diagonal,
        [sq, lambda: torch.arange(5.0), lambda: torch.ones(5)],
    ),
    "base_add_visible_in_views": (_base_inplace_visible, [m46]),
    "base_mul_tensor_visible": (_base_mul_tensor_visible, [m46, lambda: torch.arange(6.0) - 2]),
    "base_fill_visible": (_base_fill_visible, [sq]),
    "base_zero_visible": (_base_zero_visible, [m46]),
    "write_visible_in_overlapping_view": (_write_visible_in_overlapping_view, [m46]),
    "write_through_int32_view": (_write_i32_view, [sq]),
    "write_through_int16_view": (_write_i16_view, [sq]),
    "write_through_uint8_view": (_write_u8_view, [sq]),
    "write_through_bf16_view": (_write_bf16_view, [sq]),
    "float_write_seen_in_int_view": (_write_float_see_in_int_view, [sq]),
    "write_u8_slice_as_int16_view": (_write_u8_slice_i16_view, [sq]),
    "write_int64_as_int32_view": (_write_i64_as_i32, [lambda: m46(torch.int64) * -3]),
    "write_float64_as_float32_view": (_write_f64_as_f32, [lambda: m46(torch.float64) / 3]),
    "write_as_strided": (_write_as_strided, [m46]),
    "write_chain": (_write_chain, [m46]),
    "write_row_seen_in_step_view": (_write_select_then_view, [m46]),
    "add_broadcast_into_view": (_add_broadcast_into_view, [m46]),
    "setitem_block": (_setitem_block, [m46, lambda: torch.arange(6.0).reshape(2, 3) + 0.25]),
    "iadd_step_both": (_iadd_step, [m46]),
    "fill_permuted_3d": (_fill_permuted_3d, [m234]),
    "sub_div_views": (_sub_div_views, [m46]),
    "relu_view": (_relu_view, [sq]),
    "mul_unfold_view": (_inplace_on_unfold_view, [m46]),
    "copy_expanded_into_row": (_inplace_on_expanded_source, [m46]),
    "write_1d_step": (_write_1d_step, [vec]),
    "several_writes_then_reads": (_write_then_read_several, [m46]),
    "src_is_other_view_of_same_base": (_src_is_other_view_of_same_base, [m46]),
    "scalar_view_fill_": (_scalar_view_setitem, [m46]),
}


@pytest.mark.parametrize("name", list(WRITE_CASES))
def test_write_through_view(name):
    fn, makers = WRITE_CASES[name]
    check(fn, *[make() for make in makers])


# Writes PyTorch rejects: tpu must raise too (and leave the tensor unchanged).
def _inplace_overlapping_as_strided(x):
    x.as_strided((4, 3), (1, 1)).add_(1)


def _inplace_expanded(x):
    x[:, :1].expand(4, 5).mul_(2)


def _inplace_overlapping_unfold(x):
    x.unfold(0, 3, 1).zero_()


def _copy_partial_overlap(x):
    x[1:].copy_(x[:-1])


def _add_partial_overlap(x):
    x[1:].add_(x[:-1])


def _view_dtype_bad_shape(x):
    x[:, :3].view(torch.float64)


def _view_incompatible(x):
    x.t().view(-1)


ERROR_CASES = {
    "inplace_expanded": (_inplace_expanded, m46),
    "copy_partial_overlap": (_copy_partial_overlap, vec),
    "add_partial_overlap": (_add_partial_overlap, vec),
    "view_dtype_bad_shape": (_view_dtype_bad_shape, m46),
    "view_incompatible_strides": (_view_incompatible, m46),
}


@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_rejected_like_cpu(name):
    fn, make = ERROR_CASES[name]
    c = make()
    with pytest.raises(RuntimeError):
        fn(c)
    t = make().to(TPU)
    with pytest.raises(RuntimeError):
        fn(t)
    assert_same_values(t, make(), "tensor after rejected op")


# In-place ops through internally overlapping views: PyTorch accepts them and leaves
# the result unspecified (the CPU applies the op once per view element, in order).
# On tpu an in-place op is one program reading the old values, so every storage
# element the view covers is updated exactly once.


def test_overwrite_through_overlapping_view_matches_cpu():
    c = vec()
    t = c.to(TPU)
    _inplace_overlapping_unfold(c)
    _inplace_overlapping_unfold(t)
    assert_same_values(t, c, "zero_ through an overlapping unfold")


def test_update_through_overlapping_view_updates_each_element_once():
    c = vec()
    t = c.to(TPU)
    _inplace_overlapping_as_strided(t)  # covers storage elements 0..5
    expected = c.clone()
    expected[:6] += 1
    assert_same_values(t, expected, "add_ through an overlapping as_strided")


# ------------------------------------------------------------------ storage: data_ptr, nbytes


def test_untyped_storage_shared_by_views():
    c = m46()
    t = c.to(TPU)
    views = [
        lambda x: x.t(),
        lambda x: x[1:, 2:],
        lambda x: x.view(torch.int16),
        lambda x: x[3, 5],
        lambda x: x.unfold(1, 2, 1),
    ]
    for make_view in views:
        tv, cv = make_view(t), make_view(c)
        assert tv.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
        assert tv.untyped_storage().nbytes() == cv.untyped_storage().nbytes() == 96
        assert tv.data_ptr() - t.data_ptr() == cv.data_ptr() - c.data_ptr()
        assert tv.storage_offset() == cv.storage_offset()


def test_data_ptr_distinct_and_stable():
    a = torch.ones(4, device=TPU)
    b = torch.ones(4, device=TPU)
    assert a.data_ptr() != b.data_ptr()
    before = a.data_ptr()
    a.add_(1)
    a[1:].mul_(3)
    assert a.data_ptr() == before, "in-place ops must keep the DataPtr address"
    torch.testing.assert_close(a.cpu(), torch.tensor([2.0, 6.0, 6.0, 6.0]), rtol=0, atol=0)


def test_clone_does_not_alias():
    c = m46()
    t = c.to(TPU)
    tc = t.clone()
    assert tc.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    tc.add_(1)
    assert_same_values(t, c)
    assert_same_values(tc, c + 1)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.int64, torch.bfloat16, torch.bool, torch.uint8]
)
def test_untyped_storage_nbytes_per_dtype(dtype):
    c = torch.zeros(3, 5, dtype=dtype)
    t = torch.zeros(3, 5, dtype=dtype, device=TPU)
    assert t.untyped_storage().nbytes() == c.untyped_storage().nbytes()
    assert t[1:, ::2].untyped_storage().nbytes() == c.untyped_storage().nbytes()
    assert t.element_size() == c.element_size()


def test_untyped_storage_device_and_copy():
    c = m46()
    t = c.to(TPU)
    s = t.untyped_storage()
    assert s.device.type == "tpu"
    host = s.cpu()
    assert host.nbytes() == c.untyped_storage().nbytes()
    back = torch.empty(0).set_(host).view(4, 6)
    torch.testing.assert_close(back, c, rtol=0, atol=0)


# ---------------------------------------------------------------------------------- resize_


def _resize_grow(x):
    x.resize_(5, 7)
    return x[:2, :3]  # only elements that existed before (24 of them) are defined


def _resize_shrink(x):
    x.resize_(2, 5)
    return x


def _resize_to_zero(x):
    x.resize_(0)
    return x


def _resize_same_numel(x):
    x.resize_(3, 8)
    return x


def _resize_view_with_offset(x):
    v = x[1:]  # offset 6
    v.resize_(3, 2)
    return v, x


def _resize_shared_storage_grows(x):
    y = x.view(-1)
    x.resize_(40)
    x[:24].add_(1)
    return y, x[:24]


def _resize_channels_last(x):
    y = x.view(-1)[:24]
    x.resize_(1, 2, 3, 4, memory_format=torch.channels_last)
    return x, y


def _resize_then_write(x):
    x.resize_(6, 6)
    x[4:].fill_(1.25)
    return x[4:], x[:4]


RESIZE_CASES = {
    "grow": _resize_grow,
    "shrink": _resize_shrink,
    "to_zero": _resize_to_zero,
    "same_numel": _resize_same_numel,
    "view_with_offset": _resize_view_with_offset,
    "shared_storage_grows": _resize_shared_storage_grows,
    "channels_last": _resize_channels_last,
    "then_write": _resize_then_write,
}


@pytest.mark.parametrize("name", list(RESIZE_CASES))
def test_resize_(name):
    # Inputs are not compared: resize_ leaves grown regions uninitialized.
    check(RESIZE_CASES[name], m46(), compare_inputs=False)


def test_resize_empty_tensor_then_fill():
    c = torch.empty(0)
    t = torch.empty(0, device=TPU)
    for x in (c, t):
        x.resize_(3, 4)
        x.fill_(2.5)
    assert_same_meta(t, c, "resized")
    assert t.untyped_storage().nbytes() == c.untyped_storage().nbytes()
    assert_same_values(t, c)


# -------------------------------------------------------------------------------------- set_


def _set_storage(x, y):
    y.set_(x.untyped_storage())
    y[3] = -1
    return y, x


def _set_storage_offset_size_stride(x, y):
    y.set_(x.untyped_storage(), 2, (3, 4), (6, 1))
    y[1].mul_(-1)
    return y, x


def _set_storage_transposed(x, y):
    y.set_(x.untyped_storage(), 1, (5, 4), (1, 6))
    return y, y.t(), x


def _set_storage_other_dtype(x, y):
    # int32 tensor over a float32 storage: reads the raw bits
    z = torch.empty(0, dtype=torch.int32, device=x.device)
    z.set_(x.untyped_storage(), 4, (2, 5), (5, 1))
    return z, x


def _set_storage_other_dtype_write(x, y):
    z = torch.empty(0, dtype=torch.int16, device=x.device)
    z.set_(x.untyped_storage())
    z[1::2].zero_()  # zero the high halves of every float
    return z, x


def _set_tensor(x, y):
    v = x.view(4, 6)[1:, ::2]
    y.set_(v)
    y.add_(100)
    return y, v, x


def _set_tensor_self(x, y):
    x.set_(x)
    return x


def _set_empty(x, y):
    v = x[1:]
    x.set_()
    return x, v


def _set_storage_then_base_write(x, y):
    y.set_(x.untyped_storage(), 6, (6,), (1,))
    x[1].fill_(11)
    return y


def _set_storage_grows(x, y):
    # set_ with a size beyond the storage: CPU grows the storage
    z = torch.empty(0, device=x.device)
    s = torch.arange(4.0, device=x.device)
    z.set_(s.untyped_storage(), 0, (2, 2), (2, 1))
    return z, s


SET_CASES = {
    "storage": _set_storage,
    "storage_offset_size_stride": _set_storage_offset_size_stride,
    "storage_transposed_strides": _set_storage_transposed,
    "storage_other_dtype_read": _set_storage_other_dtype,
    "storage_other_dtype_write": _set_storage_other_dtype_write,
    "tensor": _set_tensor,
    "tensor_self": _set_tensor_self,
    "empty": _set_empty,
    "storage_then_base_write": _set_storage_then_base_write,
    "storage_exact_fit": _set_storage_grows,
}


@pytest.mark.parametrize("name", list(SET_CASES))
def test_set_(name):
    x = m46().view(-1)
    y = torch.full((5,), 9.0)
    check(SET_CASES[name], x, y, compare_inputs=False)


def test_set_storage_dtype_mismatch_rejected_like_cpu():
    # set_(TypedStorage of another dtype) is an error on CPU; tpu must agree.
    c = torch.empty(0, dtype=torch.int64)
    with pytest.raises((RuntimeError, TypeError)):
        c.set_(torch.zeros(4).storage())
    t = torch.empty(0, dtype=torch.int64, device=TPU)
    with pytest.raises((RuntimeError, TypeError)):
        t.set_(torch.zeros(4, device=TPU).storage())


def test_set_cpu_storage_into_tpu_rejected():
    t = torch.empty(0, device=TPU)
    with pytest.raises(RuntimeError):
        t.set_(torch.zeros(4).untyped_storage())


# ----------------------------------------------------------------------------- misc metadata


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x,
        lambda x: x.t(),
        lambda x: x[:, 1:],
        lambda x: x[1:3],
        lambda x: x[:, :1],
        lambda x: x[:1],
        lambda x: x.unsqueeze(0).expand(2, 4, 6),
        lambda x: x.view(2, 2, 6).permute(0, 2, 1),
    ],
    ids=["base", "t", "cols", "rows", "one_col", "one_row", "expand", "permute"],
)
def test_is_contiguous_strides_offset(make):
    c = m46().clone()
    t = c.to(TPU)
    tv, cv = make(t), make(c)
    assert_same_meta(tv, cv, "view")
    assert tv.contiguous().is_contiguous()
    assert_same_values(tv.contiguous(), cv.contiguous())
    same = tv.contiguous().data_ptr() == tv.data_ptr()
    assert same == (cv.contiguous().data_ptr() == cv.data_ptr())
