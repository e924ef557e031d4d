"""Which operators the modules of torch.nn and the optimizers of torch.optim still send
to the CPU on tpu.

    python -m torch_tpu.module_sweep [--modules-only | --optimizers-only] [NAME ...]

Runs every module of PyTorch's ModuleInfo database (torch.testing._internal.common_modules)
on its sample inputs, forward and backward, in training and eval mode (and the eval mode's
inference fast paths, without gradients), and one step of every optimizer of the
OptimizerInfo database on each of its sample configurations (foreach and fused ones
included). It prints which operators fell back to the CPU, with the modules and optimizers
that reached them, and which cases raised errors: a case that raises on tpu is run again on
the CPU, and one that raises the same exception there (a sample PyTorch's database knows to
be bad, such as FractionalMaxPool2d's float64 samples for a float32 input) is listed apart.
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import traceback

import torch

import torch_tpu


def _to(value, device: str):
    if isinstance(value, torch.Tensor):
        moved = value.detach().clone().to(device)
        return moved.requires_grad_(value.requires_grad) if value.is_floating_point() else moved
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    return value


def _raises_on_the_cpu_too(run_on, error: str) -> bool:
    """Whether the case raises the same exception class on the CPU."""
    try:
        run_on("cpu")()
    except Exception as e:
        return error.startswith(type(e).__name__ + ":")
    return False


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def _fallbacks_during(run) -> tuple[dict, str | None]:
    before = dict(torch_tpu.metrics.snapshot()["cpu_fallbacks"])
    error = None
    try:
        run()
        torch.tpu.synchronize()
    except Exception as e:  # a case that fails is reported, and the sweep goes on
        error = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    after = torch_tpu.metrics.snapshot()["cpu_fallbacks"]
    return {op: n - before.get(op, 0) for op, n in after.items() if n > before.get(op, 0)}, error


def _module_cases(names):
    from torch.testing._internal.common_modules import module_db

    for info in module_db:
        name = info.module_cls.__name__
        if names and name not in names:
            continue
        for training in (True, False):
            try:
                inputs = info.module_inputs_func(
                    info, device="cpu", dtype=torch.float32, requires_grad=True,
                    training=training,
                )  # fmt: skip
            except Exception:
                continue
            for index, sample in enumerate(inputs):
                if sample.forward_input is None:
                    continue
                yield f"{name}[{index}]{'' if training else ' eval'}", info, sample, training


def _run_module(info, sample, training, device="tpu"):
    def run():
        args = _to(sample.constructor_input.args, device)
        kwargs = _to(sample.constructor_input.kwargs, device)
        module = info.module_cls(*args, **kwargs).to(device)
        module.train(training)
        inputs = _to(sample.forward_input.args, device)
        keywords = _to(sample.forward_input.kwargs, device)
        out = module(*inputs, **keywords)
        grads = [t for t in _tensors(out) if t.requires_grad and t.is_floating_point()]
        if grads:
            sum(t.sum() for t in grads).backward()
        if not training:  # the inference fast paths (TransformerEncoderLayer, MHA...)
            with torch.no_grad():
                module(*inputs, **keywords)

    return run


def _optimizer_cases(names):
    from torch.testing._internal.common_optimizers import optim_db

    for info in optim_db:
        name = info.optim_cls.__name__
        if names and name not in names:
            continue
        try:
            configs = info.optim_inputs_func(device="tpu")
        except TypeError:
            configs = info.optim_inputs_func()
        for index, config in enumerate(configs):
            for flavour in ("", "foreach", "fused"):
                kwargs = dict(config.kwargs)
                if flavour == "foreach":
                    if "foreach" not in info.supported_impls:
                        continue
                    kwargs["foreach"] = True
                elif flavour == "fused":
                    if "fused" not in info.supported_impls:
                        continue
                    kwargs["fused"] = True
                label = f"{name}[{index}]{' ' + flavour if flavour else ''}"
                yield label, info, kwargs


def _run_optimizer(info, kwargs, device="tpu"):
    def run():
        weight = torch.randn(4, 3, device=device, requires_grad=True)
        bias = torch.randn(4, device=device, requires_grad=True)
        optimizer = info.optim_cls([weight, bias], **kwargs)

        def closure():
            optimizer.zero_grad()
            loss = (weight @ torch.ones(3, device=device) + bias).square().sum()
            loss.backward()
            return loss

        for _ in range(2):
            if info.step_requires_closure:
                optimizer.step(closure)
            else:
                closure()
                optimizer.step()

    return run


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="only these module or optimizer classes")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--modules-only", action="store_true")
    group.add_argument("--optimizers-only", action="store_true")
    args = parser.parse_args(argv)
    torch_tpu._C._set_fallback_mode("silent")
    reached = collections.defaultdict(set)  # op -> cases
    errors, cpu_errors = [], []
    cases = 0
    if not args.optimizers_only:
        for label, info, sample, training in _module_cases(set(args.names)):
            ops, error = _fallbacks_during(_run_module(info, sample, training))
            cases += 1
            for op in ops:
                reached[op].add(label.split("[")[0])
            if error:
                run_on = functools.partial(_run_module, info, sample, training)
                (cpu_errors if _raises_on_the_cpu_too(run_on, error) else errors).append(
                    (label, error)
                )
    if not args.modules_only:
        for label, info, kwargs in _optimizer_cases(set(args.names)):
            ops, error = _fallbacks_during(_run_optimizer(info, kwargs))
            cases += 1
            for op in ops:
                reached[op].add(
                    label.split("[")[0] + (" " + label.split()[-1] if " " in label else "")
                )
            if error:
                run_on = functools.partial(_run_optimizer, info, kwargs)
                (cpu_errors if _raises_on_the_cpu_too(run_on, error) else errors).append(
                    (label, error)
                )
    print(f"{cases} cases; {len(reached)} operators fell back to the CPU:")
    for op in sorted(reached):
        print(f"  {op}: {', '.join(sorted(reached[op]))}")
    print(f"{len(errors)} cases raised on tpu only:")
    for label, error in errors:
        print(f"  {label}: {error}")
    print(f"{len(cpu_errors)} cases raised on the CPU too (bad samples, not tpu's):")
    for label, error in cpu_errors:
        print(f"  {label}: {error}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception:
        traceback.print_exc()
        sys.exit(1)
