"""``nn.TransformerEncoder`` with a padding mask on tpu, without nested tensors.

In eval mode without gradients and with a ``src_key_padding_mask``, the encoder turns its
input into a nested tensor (``torch._nested_tensor_from_mask``), runs every layer's fast path
on it and pads the result back with zeros before its final norm. Nested tensors have no tpu
kernels, so that path would fail on tpu. Here, when the encoder takes it for a tpu input, it
runs its layers on the padded tensor with the padding mask instead (each real position
attends to the same keys, so its output is the same), then writes the zeros the nested path
leaves at the padded positions, and applies the norm: the values PyTorch computes on the
CPU. Whether the encoder takes the nested path is its own decision (its checks run as
always); this only changes what happens once it has.

``torch._nested_tensor_from_mask_left_aligned``, one of those checks, is a tpu op here.
"""

from __future__ import annotations

import torch

_library = torch.library.Library("aten", "IMPL")


def nested_tensor_from_mask_left_aligned(self, mask) -> bool:
    """Whether every row of `mask` (True: a real position) is its True values, then False."""
    # (the CPU kernel's checks and words)
    if mask.dim() != 2:
        raise RuntimeError("Padding mask should be 2D")
    if self.dim() != 3:
        raise RuntimeError("Input should be a 3D tensor, N * L * D")
    if tuple(mask.shape) != tuple(self.shape[:2]):
        raise RuntimeError("Mask size should match input size")
    steps = mask.to(torch.int8)
    return bool((steps[:, 1:] <= steps[:, :-1]).all())


class _NestedPathTaken(Exception):
    """Raised in place of building the nested tensor, to learn that the encoder would."""


def _encoder_forward(original):
    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        if src.device.type != "tpu" or src_key_padding_mask is None:
            return original(self, src, mask, src_key_padding_mask, is_causal)
        build = torch._nested_tensor_from_mask

        def refuse(*args, **kwargs):
            raise _NestedPathTaken

        torch._nested_tensor_from_mask = refuse
        try:
            return original(self, src, mask, src_key_padding_mask, is_causal)
        except _NestedPathTaken:
            pass
        finally:
            torch._nested_tensor_from_mask = build
        # The nested path: layers on the padded tensor with the mask, zeros at the padding,
        # then the norm.
        norm, use_nested = self.norm, self.use_nested_tensor
        self.norm, self.use_nested_tensor = None, False
        try:
            output = original(self, src, mask, src_key_padding_mask, is_causal)
        finally:
            self.norm, self.use_nested_tensor = norm, use_nested
        padded = src_key_padding_mask
        if padded.dtype != torch.bool:
            padded = padded != 0
        if not self.layers[0].self_attn.batch_first:
            padded = padded.transpose(0, 1)
        output = output.masked_fill(padded.unsqueeze(-1), 0.0)
        return self.norm(output) if self.norm is not None else output

    return forward


def install() -> None:
    _library.impl(
        "_nested_tensor_from_mask_left_aligned", nested_tensor_from_mask_left_aligned, "PrivateUse1"
    )
    encoder = torch.nn.TransformerEncoder
    if not getattr(encoder.forward, "_torch_tpu_padding", False):
        forward = _encoder_forward(encoder.forward)
        forward._torch_tpu_padding = True
        forward.__doc__ = encoder.forward.__doc__
        encoder.forward = forward
