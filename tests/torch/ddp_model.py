"""The small model and training loop the DDP tests and benchmark share."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model(width=64, depth=2, dtype=torch.float32, bias=True):
    """An MLP: 32 inputs, `depth` hidden layers of `width`, 8 outputs."""
    torch.manual_seed(0)
    layers, n = [], 32
    for _ in range(depth):
        layers += [torch.nn.Linear(n, width, bias=bias), torch.nn.ReLU()]
        n = width
    layers.append(torch.nn.Linear(n, 8, bias=bias))
    return torch.nn.Sequential(*layers).to(dtype)


def batch(rank, step, dtype=torch.float32, integer=False, rows=16):
    """This rank's inputs and targets for one step."""
    g = torch.Generator().manual_seed(1000 * rank + step)
    if integer:
        x = torch.randint(-3, 4, (rows, 32), generator=g).to(dtype)
        y = torch.randint(-3, 4, (rows, 8), generator=g).to(dtype)
    else:
        x = torch.randn(rows, 32, generator=g, dtype=dtype)
        teacher = torch.randn(32, 8, generator=torch.Generator().manual_seed(7), dtype=dtype)
        y = torch.tanh(x @ teacher)  # a fixed function to learn
    return x, y


def train(rank, steps, group=None, lr=0.05, integer=False, dtype=torch.float32, **model_args):
    """Trains a DDP copy of make_model() for `steps` SGD steps on `group`;
    returns the final parameters (one flat tensor) and the losses."""
    model = make_model(dtype=dtype, **model_args)
    ddp = DDP(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        x, y = batch(rank, step, dtype=dtype, integer=integer)
        opt.zero_grad()
        out = ddp(x)
        # The integer run's linear loss keeps a linear model's gradients
        # integer-valued, so every sum of them is exact.
        loss = (out * y).sum() if integer else torch.nn.functional.mse_loss(out, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return flat, losses
