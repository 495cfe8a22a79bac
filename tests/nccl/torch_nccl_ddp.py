"""PyTorch's own `nccl` backend on grove's libnccl.so.2 (GPU tier).

Run with grove's library preloaded, on a machine with one or more GPUs:

    LD_PRELOAD=<build>/lib/nccl/libnccl.so.2 python torch_nccl_ddp.py [--ranks 2] [--steps 20]

Every rank trains the same small model with DistributedDataParallel on
cuda:(rank % GPUs) -- two ranks share a GPU where there is one, which stock
NCCL refuses ("Duplicate GPU detected") -- each on its share of a fixed
global batch; afterwards rank 0 trains the same model on the whole batch in
one process without communication and compares: the parameters must agree
to float tolerance. It also checks that the libnccl.so.2 mapped into the
process is grove's and that torch reports NCCL 2.28.9. Prints one summary
line and exits 0 only if everything held.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def model_and_data(seed=0, n=64, d=32):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(d, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    x = torch.randn(n, d)
    y = torch.randint(0, 4, (n,))
    return model, x, y


def train(model, x, y, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()


def loaded_nccl():
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "libnccl.so" in line}
    return sorted(paths)


def rank_main(rank, ranks, steps, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=ranks, device_id=device)
    model, x, y = model_and_data()
    ddp = torch.nn.parallel.DistributedDataParallel(model.to(device), device_ids=[device.index])
    share = x.shape[0] // ranks
    mine = slice(rank * share, (rank + 1) * share)
    train(ddp, x[mine].to(device), y[mine].to(device), steps)
    torch.cuda.synchronize()
    if rank == 0:
        out.put(([p.detach().cpu() for p in ddp.module.parameters()], loaded_nccl(),
                 torch.cuda.nccl.version()))
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--port", type=int, default=29533)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_nccl_ddp: no CUDA device: skipped")
        return 77
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    procs = [ctx.Process(target=rank_main, args=(r, args.ranks, args.steps, args.port, out))
             for r in range(args.ranks)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    if any(p.exitcode != 0 for p in procs) or out.empty():
        print("torch_nccl_ddp: FAIL: a rank failed (exit codes %s)" % [p.exitcode for p in procs])
        return 1
    params, libs, version = out.get()
    reference, x, y = model_and_data()
    train(reference, x, y, args.steps)  # the whole batch, one process, CPU
    worst = max((a - b.detach()).abs().max().item() for a, b in zip(params, reference.parameters()))
    preload = os.environ.get("LD_PRELOAD", "")
    ok_lib = len(libs) == 1 and preload and os.path.realpath(libs[0]) == os.path.realpath(preload)
    ok = worst < 1e-4 and ok_lib and tuple(version) == (2, 28, 9)
    print("torch_nccl_ddp: %s: %d ranks, %d steps, max |param - single-process| = %.2e, "
          "NCCL %s from %s" % ("ok" if ok else "FAIL", args.ranks, args.steps, worst,
                               ".".join(map(str, version)), libs))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
