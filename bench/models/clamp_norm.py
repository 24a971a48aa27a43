"""Projection followed by a normalisation with a lower bound on the norm."""

import torch
from torch import nn


class ClampNorm(nn.Module):
    def __init__(self, dim=256):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        x = torch.tanh(self.proj(x))
        x = x / max(x.norm().item(), 1.0)
        return self.out(x)


def make(device="cpu"):
    torch.manual_seed(0)
    return ClampNorm().to(device), (torch.randn(64, 256, device=device),)
