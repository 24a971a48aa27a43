"""Residual block whose branch is switched on by a learned gate (if/else)."""

import torch
from torch import nn


class ResidualGate(nn.Module):
    def __init__(self, dim=256, hidden=512):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)
        self.gate = nn.Parameter(torch.tensor(0.3))

    def forward(self, x):
        h = torch.relu(self.up(x))
        if self.gate.item() > 0:
            y = x + self.down(h)
        else:
            y = x
        return torch.tanh(y)


def make(device="cpu"):
    torch.manual_seed(0)
    return ResidualGate().to(device), (torch.randn(64, 256, device=device),)
