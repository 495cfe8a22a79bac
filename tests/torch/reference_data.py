"""Inputs and references the collective tests share.

Inputs are small integers (exact in every dtype, so sums and products are
exact whatever the order), each rank's made from its rank; the reference
applies the operation to all ranks' inputs with plain torch ops.
"""
import torch
import torch.distributed as dist


def data(rank, n, dtype, salt=0, prod=False):
    i = torch.arange(n, dtype=torch.int64)
    if prod:
        v = (i + rank + salt) % 2 + 1  # 1 or 2: products of 4 ranks stay <= 16
    else:
        v = (i * 7 + rank * 13 + salt * 5) % 11
        if dtype != torch.uint8:
            v = v - 3
    return v.to(dtype)


def reference(op, tensors):
    stack = torch.stack([t.to(torch.float64) for t in tensors])
    if op == dist.ReduceOp.SUM:
        r = stack.sum(0)
    elif op == dist.ReduceOp.PRODUCT:
        r = stack.prod(0)
    elif op == dist.ReduceOp.MAX:
        r = stack.max(0).values
    elif op == dist.ReduceOp.MIN:
        r = stack.min(0).values
    else:
        r = stack.mean(0)
    return r.to(tensors[0].dtype)
