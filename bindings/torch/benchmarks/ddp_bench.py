#!/usr/bin/env python3
"""DDP training throughput of one model on the grove and gloo backends.

Starts N local ranks (forked processes, one intra-op thread each), trains a
DistributedDataParallel MLP with SGD for --steps steps after --warmup steps,
and reports steps per second (the slowest rank's). Backends run interleaved,
--reps times each, so a busy machine affects both alike; the median counts.

    PYTHONPATH=build/python python3 bindings/torch/benchmarks/ddp_bench.py --ranks 2 4
"""
import argparse
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import grove.torch  # noqa: F401  (registers the "grove" backend)


def make_model(width, depth):
    torch.manual_seed(0)
    layers, n = [], 256
    for _ in range(depth):
        layers += [torch.nn.Linear(n, width), torch.nn.ReLU()]
        n = width
    layers.append(torch.nn.Linear(n, 16))
    return torch.nn.Sequential(*layers)


def rank_main(rank, world, backend, port, args, queue):
    try:
        torch.set_num_threads(1)
        dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
        model = DDP(make_model(args.width, args.depth), bucket_cap_mb=args.bucket_mb)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(rank)
        x = torch.randn(args.batch, 256, generator=g)
        y = torch.randn(args.batch, 16, generator=g)

        def step():
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()

        for _ in range(args.warmup):
            step()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        dist.barrier()
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        queue.put((rank, args.steps / elapsed.item()))
    except BaseException as e:
        queue.put((rank, "error: %r" % e))
    # Leave without running destructors: torch 1.13's gloo process group can
    # deadlock in its destructor when DDP's reducer releases it at exit, and a
    # benchmark must not hang on either backend's teardown.
    queue.close()
    queue.join_thread()
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(world, backend, args):
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, world, backend, port, args, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=600) for _ in range(world)]
    for p in procs:
        p.join()
    for _, value in results:
        if isinstance(value, str):
            raise RuntimeError("%s with %d ranks: %s" % (backend, world, value))
    return results[0][1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--backends", nargs="+", default=["grove", "gloo"])
    ap.add_argument("--width", type=int, default=512, help="hidden layer width (default 512)")
    ap.add_argument("--depth", type=int, default=4, help="hidden layers (default 4)")
    ap.add_argument("--batch", type=int, default=32, help="rows per rank per step (default 32)")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket size (default 25)")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    params = sum(p.numel() for p in make_model(args.width, args.depth).parameters())
    print("model: MLP 256-%s-16, %d parameters (%.1f MiB of fp32 gradients), batch %d per rank, %d steps"
          % ("-".join([str(args.width)] * args.depth), params, params * 4 / 2**20, args.batch, args.steps))
    print("| ranks | " + " | ".join("%s steps/s" % b for b in args.backends) + " | %s / %s |"
          % (args.backends[0], args.backends[-1]))
    print("|---:|" + "---:|" * (len(args.backends) + 1))
    for world in args.ranks:
        samples = {b: [] for b in args.backends}
        for _ in range(args.reps):
            for b in args.backends:
                samples[b].append(run(world, b, args))
        med = {b: statistics.median(v) for b, v in samples.items()}
        print("| %d | " % world + " | ".join("%.1f" % med[b] for b in args.backends)
              + " | %.2f |" % (med[args.backends[0]] / med[args.backends[-1]]), flush=True)
        print("  samples: " + "; ".join("%s %s" % (b, ", ".join("%.1f" % s for s in v)) for b, v in samples.items()),
              file=sys.stderr)


if __name__ == "__main__":
    main()
