"""``torch_tpu._internal.utils.hardware``: the chip name Helion's Pallas backend reads."""

import torch


def get_tpu_device_name() -> str:
    """The Cloud TPU name of the current device ("TPU v5e", "TPU v6e", ...)."""
    import torch_tpu

    if torch_tpu.platform() != "tpu":
        # Helion asks in order to generate Mosaic code for the chip, which only a TPU runs.
        raise RuntimeError(
            f"Helion's Pallas backend generates Mosaic kernels, which run only on a TPU; the "
            f"tpu device is served by the {torch_tpu.platform()} platform here. Off a TPU, run "
            "Helion's Pallas kernels with HELION_PALLAS_INTERPRET=1 on CPU tensors"
        )
    return torch.tpu.get_device_name()
