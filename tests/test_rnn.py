"""nn.LSTM, nn.GRU, nn.LSTMCell and nn.GRUCell on tpu: ATen sends every non-CPU device to
the fused cell ops (_thnn_fused_lstm_cell, _thnn_fused_gru_cell), which are tpu kernels
here; outputs, states and gradients match the CPU's (unfused) computation."""

import copy

import pytest
import torch

import torch_tpu  # noqa: F401


def _compare(module, inputs, rtol=1e-5, atol=1e-5):
    on_tpu = copy.deepcopy(module).to("tpu")
    want = module(*inputs)
    got = on_tpu(
        *(
            x.to("tpu") if isinstance(x, torch.Tensor) else tuple(t.to("tpu") for t in x)
            for x in inputs
        )
    )
    flat_want = [
        t
        for t in (want if isinstance(want, tuple) else (want,))
        for t in (t if isinstance(t, tuple) else (t,))
    ]
    flat_got = [
        t
        for t in (got if isinstance(got, tuple) else (got,))
        for t in (t if isinstance(t, tuple) else (t,))
    ]
    for ours, theirs in zip(flat_got, flat_want):
        torch.testing.assert_close(ours.detach().cpu(), theirs.detach(), rtol=rtol, atol=atol)
    sum(t.square().sum() for t in flat_want).backward()
    sum(t.square().sum() for t in flat_got).backward()
    for (name, ours), theirs in zip(on_tpu.named_parameters(), module.parameters()):
        torch.testing.assert_close(ours.grad.cpu(), theirs.grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize(
    "options",
    [{}, {"num_layers": 2, "bidirectional": True}, {"bias": False, "batch_first": True}],
    ids=["plain", "two_layers_bidirectional", "no_bias_batch_first"],
)
def test_recurrent_layers_match_cpu(kind, options, native):
    torch.manual_seed(0)
    module = getattr(torch.nn, kind)(6, 5, **options)
    x = torch.randn(4, 3, 6)
    _compare(module, (x,))


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell"])
def test_cells_match_cpu_with_initial_state(kind, native):
    torch.manual_seed(0)
    module = getattr(torch.nn, kind)(6, 5)
    x, h = torch.randn(3, 6), torch.randn(3, 5)
    state = (h, torch.randn(3, 5)) if kind == "LSTMCell" else h
    _compare(module, (x, state))


def test_input_gradient_and_eval_mode(native):
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(4, 3).eval()
    on_tpu = copy.deepcopy(lstm).to("tpu")
    x = torch.randn(5, 2, 4, requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    lstm(x)[0].sum().backward()
    on_tpu(xt)[0].sum().backward()
    torch.testing.assert_close(xt.grad.cpu(), x.grad, rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(on_tpu(xt)[0].cpu(), lstm(x)[0], rtol=1e-5, atol=1e-5)
