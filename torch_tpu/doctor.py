"""Checks a torch_tpu installation and says plainly whether it works.

    python -m torch_tpu.doctor

Prints the platform, the PJRT plugin (path, C API version, StableHLO versions), the
devices, the eager mode and fallback setting, then runs a short self-test on the
device against the CPU. Exits 0 when everything passed, 1 otherwise.
"""

from __future__ import annotations

import sys
import traceback

import torch

import torch_tpu


def _self_test() -> list[tuple[str, str | None]]:
    """(check, error or None) for a few end-to-end checks against the CPU."""
    checks = []

    def check(name, fn):
        try:
            fn()
            checks.append((name, None))
        except Exception as error:  # report every failure, do not stop at the first
            checks.append((name, f"{type(error).__name__}: {error}"))

    x = torch.randn(32, 32)

    def matmul():
        torch.testing.assert_close((x.to("tpu") @ x.to("tpu").T).relu().cpu(), (x @ x.T).relu())

    def view_write():
        t = x.to("tpu")
        t[:, 1:3].mul_(2)
        expected = x.clone()
        expected[:, 1:3].mul_(2)
        torch.testing.assert_close(t.cpu(), expected)

    def backward():
        a = x.to("tpu").requires_grad_()
        (a @ a).sum().backward()
        b = x.clone().requires_grad_()
        (b @ b).sum().backward()
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-3)

    def every_device():
        for index in range(torch.tpu.device_count()):
            y = torch.ones(3, device=f"tpu:{index}") + index
            assert y.device.index == index and y.sum().item() == 3 * (1 + index)

    check("matmul and relu match the CPU", matmul)
    check("writes through a view reach the base", view_write)
    check("gradients match the CPU", backward)
    check("every device computes", every_device)
    return checks


def main() -> int:
    info = torch_tpu.plugin_info()
    attributes = info["attributes"]
    python = sys.version.split()[0]
    print(f"torch_tpu {torch_tpu.__version__}, torch {torch.__version__}, Python {python}")
    platform = f"{info['platform_name']} {info['platform_version']}"
    print(f"platform:        {torch_tpu.platform()} ({platform})")
    print(f"PJRT plugin:     {info['path']}")
    print(f"PJRT C API:      {info['api_version']}")
    current = attributes.get("stablehlo_current_version", "?").replace(",", ".")
    oldest = attributes.get("stablehlo_minimum_version", "?").replace(",", ".")
    print(f"StableHLO:       {current} (oldest accepted {oldest})")
    print(f"devices:         {torch.tpu.device_count()} x {torch.tpu.get_device_name(0)}")
    stats = torch_tpu._C._memory_stats(0)
    print(f"device memory:   {stats['limit_bytes']} bytes ({stats['limit_source']})")
    print(f"eager mode:      {torch_tpu.get_eager_mode()}")
    print(f"CPU fallback:    {torch_tpu._C._get_fallback_mode()} (TORCH_TPU_CPU_FALLBACK)")
    cache = torch_tpu.cache.stats()
    if cache["directory"] is None:
        print("compile cache:   in memory only (TORCH_TPU_CACHE_DIR is empty or off)")
    else:
        size = f"{cache['bytes'] / 2**20:.1f} of {cache['max_bytes'] / 2**20:.0f} MiB"
        print(f"compile cache:   {cache['directory']} ({cache['entries']} entries, {size})")
    print(f"native kernels:  {len(torch_tpu.coverage())} ATen overloads")
    print("\nself-test:")
    try:
        checks = _self_test()
    except Exception:
        checks = [("self-test", traceback.format_exc())]
    for name, error in checks:
        print(
            f"  {'ok  ' if error is None else 'FAIL'} {name}"
            + (f"\n       {error}" if error else "")
        )
    failed = [name for name, error in checks if error is not None]
    if failed:
        print(
            "\nThe installation does NOT work. Reinstall with `bash scripts/setup.sh`, check that "
            "the plugin above matches your platform (TORCH_TPU_PLATFORM / TORCH_TPU_PJRT_PLUGIN), "
            "and report the failing checks with this output."
        )
        return 1
    print("\nThe installation works.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
