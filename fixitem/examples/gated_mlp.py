"""A small model with the host syncs fixitem rewrites.

``fixitem demo`` copies this file to a temporary folder, shows what
``fixitem scan`` finds and the diff ``fixitem apply`` makes, then checks
the rewrite with ``fixitem verify``.
"""

import torch
from torch import nn


class GatedMLP(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.up = nn.Linear(width, 4 * width, bias=False)
        self.down = nn.Linear(4 * width, width, bias=False)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        # Rescale inputs whose norm is too large.
        if x.norm().item() > 20.0:
            x = x * 0.25
        h = self.act(self.up(x))
        # A gate decides how much the block contributes.
        if gate.item() > 0:
            y = x + self.down(h)
        else:
            y = x + 0.5 * self.down(h)
        return y / max(y.norm().item(), 1.0)


def make():
    """The model and example inputs (used by ``fixitem verify --factory make``)."""
    torch.manual_seed(0)
    model = GatedMLP()
    # Between them the inputs take each rewritten condition both ways: small and large
    # norms (the rescale), an open and a closed gate, and an all-zero batch (padding),
    # whose output is zero and whose norm is therefore held up by the lower bound.
    inputs = [
        (torch.randn(8, 16), torch.tensor(1.0)),
        (torch.randn(8, 16) * 3, torch.tensor(-1.0)),
        (torch.zeros(8, 16), torch.tensor(1.0)),
    ]
    return model, inputs
