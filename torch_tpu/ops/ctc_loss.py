"""CTC loss (``nn.CTCLoss``, ``F.ctc_loss``) as tpu kernels: ``aten::_ctc_loss`` and
``aten::_ctc_loss_backward``, both overloads (lengths as lists or as tensors).

ATen has CPU and CUDA kernels only, so without these the loss ran on the CPU fallback. The
arithmetic is that of PyTorch's CPU kernel (aten/src/ATen/native/LossCTC.cpp, after Graves
et al., 2006), vectorised over the batch and the extended target (blanks between labels):

- forward: log_alpha[b, t, s] by the recursion over t, in log space; the loss is
  -log(alpha[T_b - 1, 2 L_b] + alpha[T_b - 1, 2 L_b - 1]);
- backward: log_beta by the same recursion from each sequence's last step, then the
  gradient with respect to log_probs is exp(lp) - exp(logsumexp_{s: l'(s)=c}(alpha+beta)
  + nll - lp), times the incoming gradient, and zero past each input length.

The time loop runs on the host, one step of a few tpu ops per time step. Each step reads
its row through an index tensor rather than a view at an offset, so every step is the same
program: the loop compiles a fixed number of programs whatever the sequence length.
"""

from __future__ import annotations

import torch

_library = torch.library.Library("aten", "IMPL")
_NEG_INF = float("-inf")


def _lengths(values, name: str) -> list[int]:
    if isinstance(values, torch.Tensor):
        if values.dtype not in (torch.int32, torch.int64):
            raise RuntimeError(f"{name} must be integral")
        return [int(v) for v in values.reshape(-1).cpu().tolist()]
    return [int(v) for v in values]


def _check(log_probs, targets, input_lengths, target_lengths, blank):
    if log_probs.dim() != 3:
        raise RuntimeError(
            f"Expected 3-dimensional tensor, but got {log_probs.dim()}-dimensional tensor for "
            "argument #1 'log_probs' (while checking arguments for ctc_loss_cpu)"
        )
    if log_probs.dtype not in (torch.float32, torch.float64):
        raise RuntimeError(f"\"ctc_loss_cpu\" not implemented for '{_dtype_name(log_probs.dtype)}'")
    if targets.dtype not in (torch.int32, torch.int64) or targets.is_floating_point():
        raise RuntimeError(
            "Expected tensor for argument #2 'targets' to have one of the following scalar "
            f"types: Int, Long; but got {targets.dtype} instead (while checking arguments for "
            "ctc_loss_cpu)"
        )
    if log_probs.numel() == 0:
        raise RuntimeError("log_probs tensor must not be empty")
    max_input_length, batch_size, num_labels = log_probs.shape
    if not 0 <= blank < num_labels:
        raise RuntimeError("blank must be in label range")
    if len(input_lengths) != batch_size:
        raise RuntimeError("input_lengths must be of size batch_size")
    if len(target_lengths) != batch_size:
        raise RuntimeError("target_lengths must be of size batch_size")
    for length in target_lengths:
        if length < 0:
            raise RuntimeError(f"Expected target_lengths to be non-negative, but got {length}")
        if targets.dim() != 1 and length > targets.size(1):
            raise RuntimeError(
                f"Expected tensor to have size at least {length} at dimension 1, but got size "
                f"{targets.size(1)} for argument #2 'targets' (while checking arguments for "
                "ctc_loss_cpu)"
            )
    if targets.dim() == 1 and sum(target_lengths) > targets.numel():
        raise RuntimeError(
            f"Expected tensor to have size at least {sum(target_lengths)} at dimension 0, but got "
            f"size {targets.numel()} for argument #2 'targets' (while checking arguments for "
            "ctc_loss_cpu)"
        )
    for length in input_lengths:
        if not 0 <= length <= max_input_length:
            raise RuntimeError(
                f"Expected input_lengths to have value at most {max_input_length}, but got value "
                f"{length} (while checking arguments for ctc_loss_cpu)"
            )


def _dtype_name(dtype: torch.dtype) -> str:
    return {torch.float16: "Half", torch.bfloat16: "BFloat16"}.get(dtype, str(dtype))


class _Problem:
    """The batch's extended targets and the masks both directions of the recursion use."""

    def __init__(self, log_probs, targets, input_lengths, target_lengths, blank):
        device = log_probs.device
        self.T, self.B, _ = log_probs.shape
        self.input_lengths = input_lengths
        self.target_lengths = target_lengths
        max_target = max(target_lengths, default=0)
        self.S = 2 * max_target + 1
        # labels[b, j]: target j of sequence b (padded with the blank past its length)
        if max_target == 0:
            labels = torch.full((self.B, 0), blank, dtype=torch.long, device=device)
        else:
            if targets.dim() == 1:
                offsets, start = [], 0
                for length in target_lengths:
                    offsets.append(start)
                    start += length
            rows = []
            # Any index in bounds serves past a target's length (those labels are masked
            # below); an empty target last in the 1-d targets starts at their end.
            last = targets.numel() - 1 if targets.dim() == 1 else max_target - 1
            for b, length in enumerate(target_lengths):
                base = offsets[b] if targets.dim() == 1 else 0
                rows.append(
                    [min(base + min(j, max(length - 1, 0)), last) for j in range(max_target)]
                )
            index = torch.tensor(rows, dtype=torch.long).to(device)
            source = targets.reshape(-1) if targets.dim() == 1 else targets
            if targets.dim() == 1:
                labels = source.to(torch.long)[index.reshape(-1)].reshape(self.B, max_target)
            else:
                labels = torch.gather(source.to(torch.long), 1, index)
            valid = torch.tensor(
                [[j < length for j in range(max_target)] for length in target_lengths]
            ).to(device)
            labels = torch.where(valid, labels, torch.full_like(labels, blank))
        extended = torch.full((self.B, self.S), blank, dtype=torch.long, device=device)
        if max_target:
            extended[:, 1::2] = labels
        self.extended = extended
        in_range = torch.tensor(
            [[j < 2 * length + 1 for j in range(self.S)] for length in target_lengths]
        )
        self.in_range = in_range.to(device)
        # s may come from s - 2 when l'(s) is a label different from l'(s - 2)
        skip = torch.zeros(self.B, self.S, dtype=torch.bool, device=device)
        if self.S > 2:
            skip[:, 2:] = extended[:, 2:] != extended[:, :-2]
        self.skip_from_left = skip
        # and, backwards, s may reach s + 2 likewise
        self.skip_to_right = torch.zeros_like(skip)
        if self.S > 2:
            self.skip_to_right[:, :-2] = skip[:, 2:]
        self.steps = [torch.tensor([t]).to(device) for t in range(self.T)]
        # emissions[t, b, s] = log_probs[t, b, l'(s)]
        self.emissions = torch.gather(
            log_probs, 2, extended.unsqueeze(0).expand(self.T, self.B, self.S)
        )

    def emission(self, t: int) -> torch.Tensor:
        return self.emissions.index_select(0, self.steps[t]).squeeze(0)

    def mask_by_time(self, rows: torch.Tensor, keep) -> torch.Tensor:
        """rows (B, S) where `keep` (a list of per-sequence booleans) holds, else -inf."""
        keep = torch.tensor(keep).to(rows.device).unsqueeze(1)
        return torch.where(keep, rows, torch.full_like(rows, _NEG_INF))


def _logsumexp3(a, b, c):
    m = torch.maximum(torch.maximum(a, b), c)
    m = torch.where(m == _NEG_INF, torch.zeros_like(m), m)
    return torch.log(torch.exp(a - m) + torch.exp(b - m) + torch.exp(c - m)) + m


def _shift_right(x, by: int):
    pad = torch.full((x.size(0), by), _NEG_INF, dtype=x.dtype, device=x.device)
    return (
        torch.cat([pad, x[:, : x.size(1) - by]], 1)
        if x.size(1) > by
        else torch.full_like(x, _NEG_INF)
    )


def _shift_left(x, by: int):
    pad = torch.full((x.size(0), by), _NEG_INF, dtype=x.dtype, device=x.device)
    return torch.cat([x[:, by:], pad], 1) if x.size(1) > by else torch.full_like(x, _NEG_INF)


def _forward(problem: _Problem, dtype) -> torch.Tensor:
    """log_alpha (B, T, S); -inf where a sequence has no step or no such position."""
    p = problem
    neg_inf = torch.full((p.B, p.S), _NEG_INF, dtype=dtype, device=p.extended.device)
    first = p.emission(0)
    start = torch.zeros(p.B, p.S, dtype=torch.bool)
    start[:, 0] = True
    if p.S > 1:
        start[:, 1] = torch.tensor([length > 0 for length in p.target_lengths])
    alpha = torch.where(start.to(first.device), first, neg_inf)
    alpha = p.mask_by_time(alpha, [length > 0 for length in p.input_lengths])
    rows = [alpha]
    for t in range(1, p.T):
        from_left2 = torch.where(p.skip_from_left, _shift_right(alpha, 2), neg_inf)
        step = _logsumexp3(alpha, _shift_right(alpha, 1), from_left2) + p.emission(t)
        step = torch.where(p.in_range, step, neg_inf)
        alpha = p.mask_by_time(step, [t < length for length in p.input_lengths])
        rows.append(alpha)
    return torch.stack(rows, 1)


def _negative_log_likelihood(problem: _Problem, log_alpha: torch.Tensor) -> torch.Tensor:
    p = problem
    last_t = torch.tensor([max(length - 1, 0) for length in p.input_lengths]).to(log_alpha.device)
    final = log_alpha.gather(1, last_t.view(p.B, 1, 1).expand(p.B, 1, p.S)).squeeze(1)  # (B, S)
    end = torch.tensor([2 * length for length in p.target_lengths]).to(log_alpha.device)
    l1 = final.gather(1, end.view(p.B, 1)).squeeze(1)
    l2 = final.gather(1, (end - 1).clamp(min=0).view(p.B, 1)).squeeze(1)
    has_label = torch.tensor([length > 0 for length in p.target_lengths]).to(log_alpha.device)
    l2 = torch.where(has_label, l2, torch.full_like(l2, _NEG_INF))
    m = torch.maximum(l1, l2)
    m = torch.where(m == _NEG_INF, torch.zeros_like(m), m)
    likelihood = torch.log(torch.exp(l1 - m) + torch.exp(l2 - m)) + m
    # No input step: the empty target has likelihood 1, any other 0.
    no_step = torch.tensor([length == 0 for length in p.input_lengths]).to(log_alpha.device)
    empty = torch.where(has_label, torch.full_like(l1, _NEG_INF), torch.zeros_like(l1))
    return -torch.where(no_step, empty, likelihood)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    input_lengths = _lengths(input_lengths, "input_lengths")
    target_lengths = _lengths(target_lengths, "target_lengths")
    _check(log_probs, targets, input_lengths, target_lengths, blank)
    problem = _Problem(log_probs, targets, input_lengths, target_lengths, blank)
    log_alpha = _forward(problem, log_probs.dtype)
    return _negative_log_likelihood(problem, log_alpha), log_alpha


def ctc_loss_backward(
    grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha,
    blank, zero_infinity=False,
):  # fmt: skip
    input_lengths = _lengths(input_lengths, "input_lengths")
    target_lengths = _lengths(target_lengths, "target_lengths")
    p = _Problem(log_probs, targets, input_lengths, target_lengths, blank)
    dtype, device = log_probs.dtype, log_probs.device
    neg_inf = torch.full((p.B, p.S), _NEG_INF, dtype=dtype, device=device)
    # The recursion's start at each sequence's own last step: the last blank and label.
    end = torch.zeros(p.B, p.S, dtype=torch.bool)
    for b, length in enumerate(target_lengths):
        end[b, 2 * length] = True
        if length > 0:
            end[b, 2 * length - 1] = True
    end = end.to(device)
    beta = neg_inf
    rows = [None] * p.T
    for t in range(p.T - 1, -1, -1):
        emission = p.emission(t)
        to_right2 = torch.where(p.skip_to_right, _shift_left(beta, 2), neg_inf)
        step = _logsumexp3(beta, _shift_left(beta, 1), to_right2) + emission
        step = torch.where(p.in_range, step, neg_inf)
        start = torch.where(end, emission, neg_inf)
        last = torch.tensor([t == length - 1 for length in input_lengths]).to(device).unsqueeze(1)
        before = torch.tensor([t < length - 1 for length in input_lengths]).to(device).unsqueeze(1)
        beta = torch.where(last, start, torch.where(before, step, neg_inf))
        rows[t] = beta
    log_beta = torch.stack(rows, 1)  # (B, T, S)
    # logsumexp over the positions s with l'(s) = c, per (t, b, c)
    both = (log_alpha[:, : p.T, : p.S] + log_beta).transpose(0, 1)  # (T, B, S)
    peak = both.amax(2, keepdim=True)
    peak = torch.where(peak == _NEG_INF, torch.zeros_like(peak), peak)
    index = p.extended.unsqueeze(0).expand(p.T, p.B, p.S)
    sums = torch.zeros_like(log_probs).scatter_add(2, index, torch.exp(both - peak))
    log_sums = torch.log(sums) + peak
    nll = neg_log_likelihood.view(1, p.B, 1)
    result = (torch.exp(log_probs) - torch.exp(log_sums + nll - log_probs)) * grad.view(1, p.B, 1)
    alive = torch.tensor([[t < length for length in input_lengths] for t in range(p.T)])
    alive = alive.to(device).unsqueeze(2)
    if zero_infinity:
        alive = alive & (neg_log_likelihood != float("inf")).view(1, p.B, 1)
    return torch.where(alive, result, torch.zeros_like(result))


def install() -> None:
    for name, kernel in (
        ("_ctc_loss", ctc_loss),
        ("_ctc_loss.Tensor", ctc_loss),
        ("_ctc_loss_backward", ctc_loss_backward),
        ("_ctc_loss_backward.Tensor", ctc_loss_backward),
    ):
        _library.impl(name, kernel, "PrivateUse1")
