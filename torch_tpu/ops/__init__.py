"""Operators written in Python, as compositions of tpu ops, for what has no native lowering
(CTC and margin losses, 3-d and fractional pooling and padding, the fused RNN cells and
optimizers) and the glue that lets PyTorch's Python-level fast paths (FlexAttention, the
Transformer inference paths) accept tpu tensors. Each module's ``install()`` registers its
kernels or patches; ``import torch_tpu`` runs them all through ``install_all()``.
"""

from __future__ import annotations


def install_all() -> None:
    """Installs every operator module, in the order ``import torch_tpu`` always has.

    >>> torch_tpu.ops.install_all()  # doctest: +SKIP  (import torch_tpu already did)
    """
    from torch_tpu.ops import (
        composite_ops,
        ctc_loss,
        encoder_padding,
        fast_paths,
        flex_attention,
        fractional_pool,
        fused_optim,
        int4_matmul,
        margin_losses,
        rnn_cells,
        window_ops,
    )

    flex_attention.install()  # FlexAttention admits tpu tensors (its dense path)
    fused_optim.install()  # Adam/AdamW(fused=True) as tpu kernels, not CPU fallbacks
    fast_paths.install()  # TransformerEncoderLayer's and MultiheadAttention's inference fast paths
    rnn_cells.install()  # the fused LSTM/GRU cells nn.LSTM and nn.GRU call on accelerators
    composite_ops.install()  # dot, xlogy, mish, glu: reached by torch.nn, made of tpu ops
    ctc_loss.install()  # nn.CTCLoss: ATen has CPU and CUDA kernels only
    margin_losses.install()  # nn.MultiMarginLoss, nn.MultiLabelMarginLoss
    window_ops.install()  # 3-d pooling and padding, adaptive max pooling: made of tpu ops
    fractional_pool.install()  # nn.FractionalMaxPool2d/3d: windows gathered by index
    encoder_padding.install()  # nn.TransformerEncoder's nested-tensor path, without nested tensors
    int4_matmul.install()  # int4 weight-only products (gpt-fast, torchao): ATen has CUDA's only
