"""A training loop that prints and sums the loss every step."""

import torch
from torch import nn
from torch.nn import functional as F

STEPS_PER_CALL = 8


def sizes(device):
    """(features, hidden, batch): on an accelerator, large enough that a step keeps it busy."""
    return (128, 256, 32) if str(device) == "cpu" else (1024, 8192, 8192)


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
    dim, hidden, batch = sizes(device)
    return Regressor(dim, hidden).to(device), (torch.randn(batch, dim, device=device),)


def make_step(model, device="cpu"):
    """The timed step: ``STEPS_PER_CALL`` optimizer steps over fixed batches."""
    gen = torch.Generator().manual_seed(1)
    dim, _, batch = sizes(device)
    batches = [
        (torch.randn(batch, dim, generator=gen).to(device), torch.randn(batch, 1, generator=gen).to(device))
        for _ in range(STEPS_PER_CALL)
    ]
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    return lambda *inputs: train(model, opt, batches)
