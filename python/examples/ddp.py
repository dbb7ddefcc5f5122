"""DistributedDataParallel over nexar: a small regression model, 50 steps.

    nexar-run -n 2 python3 ddp.py                              # a private nexard
    torchrun --nproc_per_node 2 --redirects 1 --tee 1 ddp.py   # nexard at NEXAR_SOCKET
"""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import nexar.torch  # noqa: F401  registers the "nexar" backend

dist.init_process_group("nexar")
rank, size = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
w_true = torch.randn(16, 1, generator=torch.Generator().manual_seed(42))
data = torch.Generator().manual_seed(rank)  # each rank its own batches
for step in range(50):
    x = torch.randn(64, 16, generator=data)
    loss = nn.functional.mse_loss(model(x), x @ w_true)
    opt.zero_grad()
    loss.backward()  # DDP averages the gradients over the ranks (nexar all_reduce)
    opt.step()
    if step % 10 == 9:
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        if rank == 0:
            print("step %2d: loss averaged over %d ranks %.4f" % (step + 1, size, mean.item()))
dist.destroy_process_group()
