"""Median step time of a (compiled) model, warm."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .numerics import fresh_copy


@dataclass
class Timing:
    median_s: float
    iterations: int
    warmup: int

    def to_json(self) -> dict:
        return {"median_ms": self.median_s * 1e3, "iterations": self.iterations, "warmup": self.warmup}


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_step_time(
    fn: Callable, args: tuple, device: torch.device, *, warmup: int = 3, iterations: int = 20
) -> Timing:
    """Median wall time of ``fn(*args)`` (forward only, no autograd graph).

    The first ``warmup`` calls (compilation, autotuning, caches) are not
    timed. The device is synchronised before and after each timed call only,
    so that a step's device work is inside its measurement and nothing else
    adds syncs.
    """
    args = fresh_copy(args)
    with torch.no_grad():
        for _ in range(warmup):
            fn(*args)
        times = []
        for _ in range(iterations):
            _synchronize(device)
            start = time.perf_counter()
            fn(*args)
            _synchronize(device)
            times.append(time.perf_counter() - start)
    return Timing(statistics.median(times), iterations, warmup)
