"""CUDA tensors on backend="grove" (GPU tier; scripts/gpu-check runs it).

    PYTHONPATH=<dir with grove/torch> python gpu_cuda_tensors.py [--ranks 2] [--bench-steps 60]

Spawns --ranks processes that share the GPUs there are (rank r on
cuda:(r % GPUs); two ranks on one GPU is the case stock NCCL refuses) and
checks, each against a reference every rank computes by itself:
  - every collective on CUDA tensors, every dtype and op the CPU path has,
    several sizes, non-contiguous tensors, the coalesced forms FSDP and
    DDP use;
  - stream semantics: the call returns while the caller's stream is still
    busy, the operation runs after that stream's earlier work, Work.wait()
    orders the caller's (side) stream after it; a tensor the caller drops
    stays valid until the GPU is done;
  - point-to-point: isend/irecv posted in both directions at once (64 MiB),
    irecv before send, batch_isend_irecv;
  - DDP (several buckets, overlapping backward) against one process training
    on the whole batch without communication: fp32, the fp16 compression
    hook, a bf16 model; FSDP on the same model;
  - a peer that dies: the survivor's next wait raises instead of hanging;
  - a benchmark: DDP steps/s on grove against the same model in one process
    without communication (the overhead grove adds).
Prints one line per check and a summary; exits 0 only if every check held.
"""
import argparse
import datetime
import faulthandler
import os
import sys
import tempfile
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from reference_data import data, reference

DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]
SIZES = [1, 1000, 70003]


def ops_for(dtype):
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MAX, dist.ReduceOp.MIN]
    if dtype.is_floating_point:
        ops.append(dist.ReduceOp.AVG)
    return ops


def barrier(dev):
    """A barrier on dev's communicator (the CUDA one for a GPU)."""
    if dev.type == "cuda":
        dist.barrier(device_ids=[dev.index])
    else:
        dist.barrier()


class Checks:
    def __init__(self, rank):
        self.rank, self.failed, self.count = rank, [], 0

    def run(self, name, fn, *args):
        self.count += 1
        trace(self.rank, f"start {name}")
        t0 = time.time()
        try:
            fn(*args)
            if self.rank == 0:
                print(f"ok    {name} ({time.time() - t0:.1f} s)", flush=True)
        except Exception:
            self.failed.append(name)
            print(f"FAIL  {name} (rank {self.rank}):\n{traceback.format_exc()}", flush=True)


def same(got, want, what, atol=0.0):
    got = got.cpu()
    if got.dtype in (torch.float16, torch.bfloat16):
        atol = max(atol, 1e-2)
    ok = torch.allclose(got.to(torch.float64), want.to(torch.float64), atol=atol, rtol=0) \
        if got.is_floating_point() else torch.equal(got, want)
    assert ok, f"{what}: got {got.flatten()[:8].tolist()} want {want.flatten()[:8].tolist()}"


def check_collectives(rank, world, dev):
    for dtype in DTYPES:
        for n in SIZES:
            trace(rank, f"collectives {dtype} n={n}")
            for op in ops_for(dtype):
                prod = op == dist.ReduceOp.PRODUCT
                x = data(rank, n, dtype, prod=prod).to(dev)
                dist.all_reduce(x, op=op)
                want = reference(op, [data(r, n, dtype, prod=prod) for r in range(world)])
                same(x, want, f"all_reduce {dtype} {op} n={n}")
                y = data(rank, n, dtype, prod=prod).to(dev)
                dist.reduce(y, dst=world - 1, op=op)
                if rank == world - 1:
                    same(y, want, f"reduce {dtype} {op} n={n}")
            b = data(rank, n, dtype).to(dev)
            dist.broadcast(b, src=1 % world)
            same(b, data(1 % world, n, dtype), f"broadcast {dtype} n={n}")
            outs = [torch.empty(n, dtype=dtype, device=dev) for _ in range(world)]
            dist.all_gather(outs, data(rank, n, dtype).to(dev))
            for r in range(world):
                same(outs[r], data(r, n, dtype), f"all_gather {dtype} n={n}")
            flat = torch.empty(world * n, dtype=dtype, device=dev)
            dist.all_gather_into_tensor(flat, data(rank, n, dtype).to(dev))
            same(flat, torch.cat([data(r, n, dtype) for r in range(world)]), f"all_gather_into_tensor {dtype}")
            ins = [data(rank, n, dtype, salt=j).to(dev) for j in range(world)]
            out = torch.empty(n, dtype=dtype, device=dev)
            dist.reduce_scatter(out, ins)
            same(out, reference(dist.ReduceOp.SUM, [data(r, n, dtype, salt=rank) for r in range(world)]),
                 f"reduce_scatter {dtype} n={n}")
            big = torch.cat([data(rank, n, dtype, salt=j) for j in range(world)]).to(dev)
            out2 = torch.empty(n, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(out2, big)
            same(out2, out.cpu(), f"reduce_scatter_tensor {dtype} n={n}")
            gl = [torch.empty(n, dtype=dtype, device=dev) for _ in range(world)] if rank == 0 else None
            dist.gather(data(rank, n, dtype).to(dev), gl, dst=0)
            if rank == 0:
                for r in range(world):
                    same(gl[r], data(r, n, dtype), f"gather {dtype}")
            sc = torch.empty(n, dtype=dtype, device=dev)
            dist.scatter(sc, [data(0, n, dtype, salt=j).to(dev) for j in range(world)] if rank == 0 else None, src=0)
            same(sc, data(0, n, dtype, salt=rank), f"scatter {dtype}")
    trace(rank, "all_to_all")
    # all_to_all_single, even and uneven; all_to_all of lists
    x = torch.arange(world * 6, dtype=torch.float32, device=dev) + 100 * rank
    y = torch.empty_like(x)
    dist.all_to_all_single(y, x)
    want = torch.cat([torch.arange(rank * 6, rank * 6 + 6, dtype=torch.float32) + 100 * r for r in range(world)])
    same(y, want, "all_to_all_single even")
    send = [r + 1 for r in range(world)]          # rank sends r+1 rows to rank r
    recv = [rank + 1] * world                       # and gets rank+1 rows from each
    xs = torch.cat([torch.full((send[r], 3), float(rank * 10 + r)) for r in range(world)]).to(dev)
    ys = torch.empty(sum(recv), 3, device=dev)
    dist.all_to_all_single(ys, xs, output_split_sizes=recv, input_split_sizes=send)
    same(ys, torch.cat([torch.full((rank + 1, 3), float(r * 10 + rank)) for r in range(world)]),
         "all_to_all_single uneven")
    outs = [torch.empty(4, device=dev) for _ in range(world)]
    dist.all_to_all(outs, [torch.full((4,), float(rank * 10 + r), device=dev) for r in range(world)])
    for r in range(world):
        same(outs[r], torch.full((4,), float(r * 10 + rank)), "all_to_all lists")
    trace(rank, "non-contiguous, coalesced, barrier")
    # non-contiguous, coalesced forms, barrier on the device
    t = (torch.arange(12, dtype=torch.float32).view(3, 4) + rank).to(dev).t()
    dist.all_reduce(t)
    same(t, sum(torch.arange(12, dtype=torch.float32).view(3, 4) + r for r in range(world)).t(), "non-contiguous")
    from torch.distributed.distributed_c10d import _coalescing_manager
    a = [torch.full((5 + i,), float(rank + i), device=dev) for i in range(3)]
    outs = [torch.empty(world * (5 + i), device=dev) for i in range(3)]
    with _coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, a):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    for i, o in enumerate(outs):
        same(o, torch.cat([torch.full((5 + i,), float(r + i)) for r in range(world)]), "coalesced all_gather_into_tensor")
    ts = [torch.full((3,), float(rank), device=dev), torch.full((2,), float(rank * 2), device=dev)]
    dist.all_reduce_coalesced(ts)
    s = sum(range(world))
    same(ts[0], torch.full((3,), float(s)), "all_reduce_coalesced 0")
    same(ts[1], torch.full((2,), float(2 * s)), "all_reduce_coalesced 1")
    barrier(dev)
    bits = torch.tensor([1 << rank, 7], dtype=torch.int32, device=dev)
    dist.all_reduce(bits, op=dist.ReduceOp.BOR)
    same(bits, torch.tensor([(1 << world) - 1, 7], dtype=torch.int32), "BOR")


def check_streams(rank, world, dev):
    # The call returns while the caller's stream is busy; the operation runs
    # after that stream's earlier work.
    x = torch.zeros(1 << 20, device=dev)
    dist.all_reduce(x)  # the first call of a size plans it on the host; later ones only queue
    torch.cuda.synchronize(dev)
    torch.cuda._sleep(400_000_000)  # about 0.2-0.4 s of GPU time on the current stream
    x.fill_(rank + 1.0)
    t0 = time.time()
    work = dist.all_reduce(x, async_op=True)
    took = time.time() - t0
    assert took < 0.15, f"all_reduce blocked the host for {took:.3f} s"
    assert not work.is_completed(), "completed while the stream it waits for is still sleeping"
    work.wait()
    same(x[:4], torch.full((4,), float(sum(r + 1 for r in range(world)))), "after a busy stream")
    assert work.is_completed()
    # Work.wait() orders a side stream after the operation.
    side = torch.cuda.Stream(device=dev)
    with torch.cuda.stream(side):
        y = torch.full((1 << 22,), float(rank), device=dev)
        w = dist.all_reduce(y, async_op=True)
        w.wait()
        z = y * 2
    side.synchronize()
    same(z[:4], torch.full((4,), 2.0 * sum(range(world))), "side stream after wait()")
    # A dropped input stays valid until the GPU is done with it.
    works = []
    for i in range(8):
        works.append(dist.all_reduce(torch.full((1 << 20,), float(i + rank), device=dev), async_op=True))
        junk = torch.full((1 << 20,), -1.0, device=dev)  # may reuse freed blocks
        del junk
    for i, w in enumerate(works):
        w.wait()
        same(w.result()[0][:4], torch.full((4,), float(sum(i + r for r in range(world)))), f"dropped input {i}")
    # The future of a CUDA work, as DDP's comm hooks use it.
    f = dist.all_reduce(torch.ones(8, device=dev), async_op=True).get_future()
    v = f.then(lambda fut: fut.value()[0] * 3).wait()
    same(v, torch.full((8,), 3.0 * world), "future.then")


def check_p2p(rank, world, dev):
    if world != 2:
        return
    peer = 1 - rank
    for n in (1, 1 << 18, 1 << 24):  # 4 B .. 64 MiB of float32
        a = torch.full((n,), float(rank + 1), device=dev)
        b = torch.empty(n, device=dev)
        s = dist.isend(a, peer)
        r = dist.irecv(b, peer)
        s.wait()
        r.wait()
        same(b[:4], torch.full((4,), float(peer + 1)), f"both directions n={n}")
    # irecv posted before the peer's send
    c = torch.empty(1000, device=dev)
    if rank == 0:
        r = dist.irecv(c, 1)
        barrier(dev)
        r.wait()
        same(c, torch.arange(1000, dtype=torch.float32), "irecv before send")
    else:
        barrier(dev)
        dist.send(torch.arange(1000, dtype=torch.float32, device=dev), 0)
    ops = [dist.P2POp(dist.isend, torch.full((4096,), float(rank), device=dev), peer),
           dist.P2POp(dist.irecv, c2 := torch.empty(4096, device=dev), peer)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    same(c2[:4], torch.full((4,), float(peer)), "batch_isend_irecv")


def model_and_data(dtype=torch.float32, seed=0, n=64, d=32):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(d, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 4)).to(dtype)
    x = torch.randn(n, d).to(dtype)
    y = torch.randint(0, 4, (n,))
    return model, x, y


def train(model, x, y, steps, lr=0.05):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(model(x).float(), y).backward()
        opt.step()


def reference_params(dev, dtype, steps):
    model, x, y = model_and_data(dtype)
    model = model.to(dev)
    train(model, x.to(dev), y.to(dev), steps)
    return [p.detach().float().cpu() for p in model.parameters()]


def shard(rank, world, x, y):
    per = x.shape[0] // world
    return x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]


def check_ddp(rank, world, dev, dtype, hook, atol):
    from torch.nn.parallel import DistributedDataParallel as DDP
    model, x, y = model_and_data(dtype)
    ddp = DDP(model.to(dev), device_ids=[dev.index], bucket_cap_mb=0.05)  # several buckets
    if hook is not None:
        ddp.register_comm_hook(None, hook)
    xs, ys = shard(rank, world, x, y)
    train(ddp, xs.to(dev), ys.to(dev), 10)
    want = reference_params(dev, dtype, 10)
    for p, w in zip(ddp.module.parameters(), want):
        same(p.detach().float(), w, f"DDP {dtype} parameters", atol=atol)


def check_fsdp(rank, world, dev):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import FullStateDictConfig, StateDictType
    model, x, y = model_and_data()
    fsdp = FSDP(model.to(dev), device_id=dev)
    xs, ys = shard(rank, world, x, y)
    train(fsdp, xs.to(dev), ys.to(dev), 10)
    with FSDP.state_dict_type(fsdp, StateDictType.FULL_STATE_DICT, FullStateDictConfig(rank0_only=False)):
        state = fsdp.state_dict()
    want = reference_params(dev, torch.float32, 10)
    for (name, p), w in zip(state.items(), want):
        same(p.float(), w, f"FSDP {name}", atol=1e-4)


def bench(rank, world, dev, steps):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)]).to(dev)
    x = torch.randn(64, 1024, device=dev)
    ddp = DDP(model, device_ids=[dev.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)

    def step(m):
        opt.zero_grad()
        m(x).square().mean().backward()
        opt.step()

    for i in range(5):
        trace(rank, f"bench warm-up step {i}")
        step(ddp)
    torch.cuda.synchronize(dev)
    barrier(dev)
    t0 = time.time()
    for _ in range(steps):
        step(ddp)
    torch.cuda.synchronize(dev)
    grove_rate = steps / (time.time() - t0)
    barrier(dev)
    alone = 0.0
    if rank == 0:  # the same steps in this process alone, no communication
        for _ in range(5):
            step(model)
        torch.cuda.synchronize(dev)
        t0 = time.time()
        for _ in range(steps):
            step(model)
        torch.cuda.synchronize(dev)
        alone = steps / (time.time() - t0)
        params = sum(p.numel() for p in model.parameters())
        print(f"bench: DDP {world} ranks on grove (CUDA tensors, {params * 4 / 2**20:.0f} MiB of "
              f"gradients): {grove_rate:.1f} steps/s per rank; one process without communication: "
              f"{alone:.1f} steps/s; ratio {grove_rate / alone:.2f}", flush=True)
    barrier(dev)


def trace(rank, what):
    if os.environ.get("GROVE_TEST_TRACE") == "1":
        print(f"rank {rank}: {what}", flush=True)


def rank_main(rank, world, init, bench_steps, status):
    faulthandler.enable(all_threads=True)
    import grove.torch  # noqa: F401  registers the backend
    ngpu = torch.cuda.device_count()
    dev = torch.device("cuda", rank % ngpu)
    torch.cuda.set_device(dev)
    dist.init_process_group("grove", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    checks = Checks(rank)
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    if bench_steps < 0:  # --bench-only
        checks.run("DDP benchmark", bench, rank, world, dev, -bench_steps)
        status[rank] = len(checks.failed)
        dist.destroy_process_group()
        return
    checks.run("collectives (every dtype, op, size; lists, coalesced, barrier)", check_collectives, rank, world, dev)
    checks.run("stream semantics", check_streams, rank, world, dev)
    checks.run("point-to-point", check_p2p, rank, world, dev)
    checks.run("DDP fp32", check_ddp, rank, world, dev, torch.float32, None, 1e-5)
    checks.run("DDP fp16 compression hook", check_ddp, rank, world, dev, torch.float32,
               default_hooks.fp16_compress_hook, 5e-3)
    checks.run("DDP bf16 model", check_ddp, rank, world, dev, torch.bfloat16, None, 5e-2)
    checks.run("FSDP", check_fsdp, rank, world, dev)
    if bench_steps:
        checks.run("DDP benchmark", bench, rank, world, dev, bench_steps)
    status[rank] = len(checks.failed)
    if rank == 0:
        print(f"rank 0: {checks.count - len(checks.failed)} of {checks.count} checks held", flush=True)
    dist.destroy_process_group()


def dead_peer_main(rank, world, init, status):
    faulthandler.enable(all_threads=True)
    import grove.torch  # noqa: F401
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("grove", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=10))
    x = torch.ones(1 << 20, device=dev)
    dist.all_reduce(x)
    torch.cuda.synchronize(dev)
    if rank == 1:
        os._exit(0)  # dies without a word
    t0 = time.time()
    try:
        for _ in range(3):  # the error shows on the next operation or wait
            dist.all_reduce(x)
            torch.cuda.synchronize(dev)
            time.sleep(0.5)
        barrier(dev)
        print("FAIL  dead peer: no error after the peer died", flush=True)
        status[rank] = 1
    except Exception as e:  # noqa: BLE001
        print(f"ok    dead peer: raised after {time.time() - t0:.1f} s: {str(e)[:200]}", flush=True)
        status[rank] = 0
    os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--bench-steps", type=int, default=60, help="0: no benchmark")
    ap.add_argument("--bench-only", action="store_true", help="only the benchmark")
    ap.add_argument("--no-dead-peer", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: skipped")
        sys.exit(77)
    ctx = mp.get_context("spawn")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        status = ctx.Manager().dict()
        steps = -args.bench_steps if args.bench_only else args.bench_steps
        mp.start_processes(rank_main, args=(args.ranks, f"file://{tmp}/rdv", steps, status),
                           nprocs=args.ranks, join=True, start_method="spawn")
        failed += sum(status.values())
        if args.bench_only or args.no_dead_peer:
            print("torch-cuda: " + ("all checks held" if failed == 0 else f"{failed} failed"), flush=True)
            sys.exit(0 if failed == 0 else 1)
        status2 = ctx.Manager().dict()
        procs = [ctx.Process(target=dead_peer_main, args=(r, 2, f"file://{tmp}/rdv2", status2)) for r in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.kill()
        if status2.get(0, 1) != 0:
            print("FAIL  dead peer: the surviving rank hung or did not raise", flush=True)
            failed += 1
    print("torch-cuda: " + ("all checks held" if failed == 0 else f"{failed} failed"), flush=True)
    sys.exit(0 if failed == 0 else 1)


if __name__ == "__main__":
    main()
