"""The fused LSTM and GRU cells that ``nn.LSTM``, ``nn.GRU``, ``nn.LSTMCell`` and
``nn.GRUCell`` call on accelerators, as tpu kernels.

ATen's recurrent layers take ``aten::_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell``
for every non-CPU device, PrivateUse1 included; those ops have CUDA kernels only, and the
CPU fallback cannot run them either, so without these kernels the recurrent modules raised
on tpu. The arithmetic is that of PyTorch's CUDA kernels (aten/src/ATen/native/cuda/RNN.cu):

- LSTM gates are (input, forget, cell, output); the workspace holds the four activated
  gates, from which the backward kernel needs nothing else but cx and cy;
- GRU gates are (reset, input, new); the new gate is tanh(in + r * hn), and the workspace
  holds r, z, n, hx and hn (the hidden part of the new gate, bias included).
"""

from __future__ import annotations

import torch

_library = torch.library.Library("aten", "IMPL")


def _gates(input_gates, hidden_gates, input_bias, hidden_bias):
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias
    if hidden_bias is not None:
        gates = gates + hidden_bias
    return gates


def lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    i, f, g, o = _gates(input_gates, hidden_gates, input_bias, hidden_bias).chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy, cy, torch.cat([i, f, g, o], 1)


def lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    i, f, g, o = workspace.chunk(4, 1)
    tanh_cy = cy.tanh()
    if grad_hy is None:
        grad_hy = torch.zeros_like(cy)
    grad_o = grad_hy * tanh_cy * o * (1 - o)
    grad_c = grad_hy * o * (1 - tanh_cy * tanh_cy)
    if grad_cy is not None:
        grad_c = grad_c + grad_cy
    grad_i = grad_c * g * i * (1 - i)
    grad_f = grad_c * cx * f * (1 - f)
    grad_g = grad_c * i * (1 - g * g)
    grad_gates = torch.cat([grad_i, grad_f, grad_g, grad_o], 1)
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, grad_c * f, grad_bias


def gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    if input_bias is not None:
        input_gates = input_gates + input_bias
    if hidden_bias is not None:
        hidden_gates = hidden_gates + hidden_bias
    ir, ii, in_ = input_gates.chunk(3, 1)
    hr, hi, hn = hidden_gates.chunk(3, 1)
    r = (ir + hr).sigmoid()
    z = (ii + hi).sigmoid()
    n = (in_ + r * hn).tanh()
    hy = n + z * (hx - n)
    return hy, torch.cat([r, z, n, hx, hn], 1)


def gru_cell_backward(grad_hy, workspace, has_bias):
    r, z, n, hx, hn = workspace.chunk(5, 1)
    grad_z = grad_hy * (hx - n) * z * (1 - z)
    grad_hx = grad_hy * z
    grad_in = grad_hy * (1 - z) * (1 - n * n)
    grad_hn = grad_in * r
    grad_r = grad_in * hn * r * (1 - r)
    grad_input_gates = torch.cat([grad_r, grad_z, grad_in], 1)
    grad_hidden_gates = torch.cat([grad_r, grad_z, grad_hn], 1)
    biases = (grad_input_gates.sum(0), grad_hidden_gates.sum(0)) if has_bias else (None, None)
    return grad_input_gates, grad_hidden_gates, grad_hx, *biases


def install() -> None:
    _library.impl("_thnn_fused_lstm_cell", lstm_cell, "PrivateUse1")
    _library.impl("_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward, "PrivateUse1")
    _library.impl("_thnn_fused_gru_cell", gru_cell, "PrivateUse1")
    _library.impl("_thnn_fused_gru_cell_backward", gru_cell_backward, "PrivateUse1")
