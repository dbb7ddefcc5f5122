"""DistributedDataParallel over nexar, checked against DDP over Gloo and a one-process
reference.  Every rank trains the same small model for 20 steps of SGD with momentum on
its own batches, once with DDP on nexar's process group and once on Gloo's; the
reference trains one model on the mean of every rank's loss, which is what DDP's averaged
gradients compute.  Run under nexar-run or torchrun (env:// rendezvous either way):

    nexar-run -n 2 python3 tests/python/ddp_train.py
    torchrun --standalone --nproc_per_node 2 tests/python/ddp_train.py   # NEXAR_SOCKET set

Tolerances: float32 sums in a different order differ in the last bits, and 20 steps of
momentum carry that along: Gloo and nexar agree within 1e-6, the reference within 1e-5
(absolute, per parameter; the parameters are of order 0.1 to 1).  Integer collectives
must agree exactly.  Exits 0 when all hold, 1 otherwise, naming what failed.
"""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import nexar.torch  # noqa: F401  (registers the "nexar" backend)

STEPS, LR, MOMENTUM = 20, 0.05, 0.9


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def train(rank, group=None, size=None):
    """DDP on group (size None), or the one-process reference over size ranks' batches."""
    model = make_model()
    net = DDP(model, process_group=group) if size is None else model
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
    for step in range(STEPS):
        opt.zero_grad()
        if size is None:
            x, y = batch(rank, step)
            loss = nn.functional.mse_loss(net(x), y)
        else:
            loss = sum(nn.functional.mse_loss(net(x), y)
                       for x, y in (batch(r, step) for r in range(size))) / size
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def max_diff(a, b):
    return max((x - y).abs().max().item() for x, y in zip(a, b))


def main():
    dist.init_process_group("nexar")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(list(range(size)), backend="gloo")

    on_nexar = train(rank)
    on_gloo = train(rank, group=gloo)
    reference = train(rank, size=size)
    alone = train(rank, size=1) if size > 1 else None
    start = [p.detach() for p in make_model().parameters()]

    failures = []
    d_gloo, d_ref = max_diff(on_nexar, on_gloo), max_diff(on_nexar, reference)
    if d_gloo > 1e-6:
        failures.append("nexar and Gloo differ by %g > 1e-6" % d_gloo)
    if d_ref > 1e-5:
        failures.append("nexar and the reference differ by %g > 1e-5" % d_ref)
    # The checks have power: training moved the parameters, and a rank that trained on
    # its own batches alone ends elsewhere.
    if max_diff(on_nexar, start) < 1e-2:
        failures.append("the parameters hardly moved")
    if alone is not None and max_diff(alone, reference) < 1e-3:
        failures.append("one rank alone ends where the job does: the check is blind")

    gen = torch.Generator().manual_seed(77 + rank)
    ints = torch.randint(-2**40, 2**40, (1031,), generator=gen, dtype=torch.int64)
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN):
        a, b = ints.clone(), ints.clone()
        dist.all_reduce(a, op=op)
        dist.all_reduce(b, op=op, group=gloo)
        if not torch.equal(a, b):
            failures.append("int64 all_reduce %s differs from Gloo's" % op)

    if rank == 0:
        print("ddp: %d ranks, %d steps: nexar vs Gloo max |diff| %.3g, vs reference %.3g"
              % (size, STEPS, d_gloo, d_ref))
    dist.destroy_process_group(gloo)
    dist.destroy_process_group()
    for f in failures:
        print("ddp: rank %d: %s" % (rank, f), file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
