"""A training loop that prints and sums the loss every step."""

import torch
from torch import nn
from torch.nn import functional as F

STEPS_PER_CALL = 8


class Regressor(nn.Module):
    def __init__(self, dim=128, hidden=256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)


def train(model, opt, batches):
    for step, (x, y) in enumerate(batches):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return None


def make(device="cpu"):
    torch.manual_seed(0)
    return Regressor().to(device), (torch.randn(32, 128, device=device),)


def make_step(model, device="cpu"):
    """The timed step: ``STEPS_PER_CALL`` optimizer steps over fixed batches."""
    gen = torch.Generator().manual_seed(1)
    batches = [
        (torch.randn(32, 128, generator=gen).to(device), torch.randn(32, 1, generator=gen).to(device))
        for _ in range(STEPS_PER_CALL)
    ]
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    return lambda *inputs: train(model, opt, batches)
