"""Choose the device, move the model and inputs to it, and ask CUDA about syncs."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch

from .loading import UsageError
from .numerics import fresh_copy, move_to

DEVICE_CHOICES = ("auto", "cpu", "cuda")


def resolve_device(name: str) -> torch.device:
    """``auto`` is ``cuda`` when available, else ``cpu``; ``cuda:N`` is accepted."""
    name = (name or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise UsageError(f"--device {name}: CUDA is not available on this machine (use --device cpu or auto)")
        try:
            dev = torch.device(name)
        except RuntimeError as exc:
            raise UsageError(f"--device {name}: {exc}") from exc
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise UsageError(f"--device {name}: only {torch.cuda.device_count()} CUDA device(s)")
        return dev
    raise UsageError(f"--device must be one of {', '.join(DEVICE_CHOICES)} (or cuda:N); got {name!r}")


def move_model(model, device: torch.device):
    if isinstance(model, torch.nn.Module):
        return model.to(device)
    return model


def move_inputs(inputs: Sequence[tuple], device: torch.device) -> list[tuple]:
    return [move_to(args, device) for args in inputs]


def cuda_sync_warnings(fn: Callable, inputs: Sequence[tuple], device: torch.device) -> int | None:
    """Synchronising CUDA calls that ``fn`` makes, per ``torch.cuda.set_sync_debug_mode("warn")``.

    Each input is run once un-watched first (compilation, cuBLAS and
    allocator warm-up sync on their own), then once watched; returns the
    number of warnings, or None when not on CUDA or the mode is unavailable.
    """
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    get_mode = getattr(torch.cuda, "get_sync_debug_mode", None)
    set_mode = getattr(torch.cuda, "set_sync_debug_mode", None)
    if get_mode is None or set_mode is None:
        return None
    calls = [fresh_copy(args) for args in inputs]
    with torch.no_grad():
        for args in calls:
            fn(*args)
    torch.cuda.synchronize(device)
    previous = get_mode()
    count = 0
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            set_mode("warn")
            try:
                with torch.no_grad():
                    for args in calls:
                        fn(*args)
            finally:
                set_mode(previous)
        count = sum(1 for w in caught if "synchroniz" in str(w.message).lower())
    finally:
        torch.cuda.synchronize(device)
    return count
