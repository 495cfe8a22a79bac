"""Every collective of the grove backend, on several dtypes and sizes,
against a reference each rank computes locally from every rank's inputs.

Inputs are small integers (exact in every dtype, so sums and products are
exact whatever the order), each rank's made from its rank; the reference
applies the operation to all ranks' inputs with plain torch ops.
"""
import pytest

import harness
from harness import dist, torch
from reference_data import data, reference

DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]
SIZES = [0, 1, 7, 1000, 70003]  # 70003 elements: past the direct algorithms, rings and chains
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def ops_for(dtype):
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MAX, dist.ReduceOp.MIN]
    if dtype in (torch.float32, torch.float64):
        ops.append(dist.ReduceOp.AVG)
    return ops


class Checker:
    def __init__(self, rank, world):
        self.rank, self.world, self.failures = rank, world, []

    def expect(self, what, got, want):
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            self.failures.append("%s: got %s, want %s" % (what, got.flatten()[:8].tolist(), want.flatten()[:8].tolist()))


def check_reductions(c, dtype, n):
    rank, world = c.rank, c.world
    for op in ops_for(dtype):
        prod = op == dist.ReduceOp.PRODUCT
        every = [data(r, n, dtype, prod=prod) for r in range(world)]
        want = reference(op, every)
        t = data(rank, n, dtype, prod=prod)
        dist.all_reduce(t, op=op)
        c.expect("all_reduce %s %s n=%d" % (op, dtype, n), t, want)
        root = (n + 1) % world
        t = data(rank, n, dtype, prod=prod)
        dist.reduce(t, root, op=op)
        if rank == root:
            c.expect("reduce %s %s n=%d" % (op, dtype, n), t, want)
        blocks = [[data(r, n, dtype, salt=j, prod=prod) for j in range(world)] for r in range(world)]
        out = torch.empty(n, dtype=dtype)
        dist.reduce_scatter(out, blocks[rank], op=op)
        c.expect("reduce_scatter %s %s n=%d" % (op, dtype, n), out,
                 reference(op, [blocks[r][rank] for r in range(world)]))
        flat_in = torch.cat(blocks[rank])
        dist._reduce_scatter_base(out, flat_in, op=op)
        c.expect("_reduce_scatter_base %s %s n=%d" % (op, dtype, n), out,
                 reference(op, [blocks[r][rank] for r in range(world)]))


def check_copies(c, dtype, n):
    rank, world = c.rank, c.world
    every = [data(r, n, dtype) for r in range(world)]
    for root in range(world):
        t = data(rank, n, dtype)
        dist.broadcast(t, root)
        c.expect("broadcast root=%d %s n=%d" % (root, dtype, n), t, every[root])
    outs = [torch.empty(n, dtype=dtype) for _ in range(world)]
    dist.all_gather(outs, every[rank])
    for r in range(world):
        c.expect("all_gather block %d %s n=%d" % (r, dtype, n), outs[r], every[r])
    flat = torch.empty(n * world, dtype=dtype)
    dist._all_gather_base(flat, every[rank])
    c.expect("_all_gather_base %s n=%d" % (dtype, n), flat, torch.cat(every))
    root = world - 1
    gathered = [torch.empty(n, dtype=dtype) for _ in range(world)] if rank == root else None
    dist.gather(every[rank], gathered, dst=root)
    if rank == root:
        for r in range(world):
            c.expect("gather block %d %s n=%d" % (r, dtype, n), gathered[r], every[r])
    pieces = [data(root, n, dtype, salt=j) for j in range(world)]
    out = torch.empty(n, dtype=dtype)
    dist.scatter(out, pieces if rank == root else None, src=0 if root == 0 else root)
    c.expect("scatter %s n=%d" % (dtype, n), out, pieces[rank])
    send = torch.cat([data(rank, n, dtype, salt=j) for j in range(world)])
    recv = torch.empty(n * world, dtype=dtype)
    dist.all_to_all_single(recv, send)
    c.expect("all_to_all_single %s n=%d" % (dtype, n), recv,
             torch.cat([data(r, n, dtype, salt=rank) for r in range(world)]))


def check_uneven_and_p2p(c, dtype):
    rank, world = c.rank, c.world
    # Rank r sends (r + j + 1) rows of 3 to rank j.
    rows_to = [rank + j + 1 for j in range(world)]
    rows_from = [r + rank + 1 for r in range(world)]
    send = torch.cat([data(rank, 3 * k, dtype, salt=j).view(k, 3) for j, k in enumerate(rows_to)])
    recv = torch.empty(sum(rows_from), 3, dtype=dtype)
    dist.all_to_all_single(recv, send, output_split_sizes=rows_from, input_split_sizes=rows_to)
    c.expect("all_to_all_single uneven %s" % dtype, recv,
             torch.cat([data(r, 3 * k, dtype, salt=rank).view(k, 3) for r, k in enumerate(rows_from)]))
    ins = [data(rank, j + 2, dtype, salt=j) for j in range(world)]
    outs = [torch.empty(rank + 2, dtype=dtype) for _ in range(world)]
    dist.all_to_all(outs, ins)
    for r in range(world):
        c.expect("all_to_all list from %d %s" % (r, dtype), outs[r], data(r, rank + 2, dtype, salt=rank))
    # A ring of sends: even ranks send first, odd ranks receive first.
    right, left = (rank + 1) % world, (rank - 1) % world
    got = torch.empty(5, dtype=dtype)
    if rank % 2 == 0:
        dist.send(data(rank, 5, dtype), right)
        dist.recv(got, left)
    else:
        dist.recv(got, left)
        dist.send(data(rank, 5, dtype), right)
    c.expect("send/recv %s" % dtype, got, data(left, 5, dtype))


def check_forms(c):
    """Non-contiguous tensors, async work, futures, bool, coalesced, barrier."""
    rank, world = c.rank, c.world
    base = data(rank, 24, torch.float32).view(4, 6)
    t = base.t()  # not contiguous
    dist.all_reduce(t)
    c.expect("all_reduce non-contiguous", t, sum(data(r, 24, torch.float32) for r in range(world)).view(4, 6).t())
    works = [dist.all_reduce(data(rank, 100, torch.int32), async_op=True) for _ in range(5)]
    t = data(rank, 100, torch.int32)
    fut = dist.all_reduce(t, async_op=True).get_future()
    for w in works:
        w.wait()
        if not w.is_completed() or not w.is_success():
            c.failures.append("async work not completed after wait()")
    got = fut.wait()[0]
    c.expect("future result", got, sum(data(r, 100, torch.int32) for r in range(world)))
    flags = torch.tensor([rank == 0, False, True])
    dist.all_reduce(flags)  # bool SUM is "any"
    c.expect("bool all_reduce", flags, torch.tensor([True, False, True]))
    a, b = data(rank, 10, torch.float64), data(rank, 3, torch.float64).view(3, 1)
    dist.all_reduce_coalesced([a, b])
    c.expect("all_reduce_coalesced a", a, sum(data(r, 10, torch.float64) for r in range(world)))
    c.expect("all_reduce_coalesced b", b, sum(data(r, 3, torch.float64) for r in range(world)).view(3, 1))
    dist.barrier()


def all_collectives(rank, world):
    c = Checker(rank, world)
    for dtype in DTYPES:
        for n in SIZES:
            check_reductions(c, dtype, n)
            check_copies(c, dtype, n)
        check_uneven_and_p2p(c, dtype)
    check_forms(c)
    return c.failures


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_collective_matches_reference(world):
    failures = harness.run_ranks(all_collectives, world)
    flat = ["rank %d: %s" % (r, f) for r, fs in enumerate(failures) for f in fs]
    assert not flat, "\n".join(flat[:40])


def bad_input(rank, world):
    """Each call must raise a clear error; returns the messages."""
    msgs = []
    cases = [
        ("BAND on float", lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BAND)),
        ("int16 dtype", lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16))),
        ("sparse max", lambda: dist.all_reduce(torch.ones(4).to_sparse(), op=dist.ReduceOp.MAX)),
        ("wrong list length", lambda: dist.all_gather([torch.empty(4)], torch.ones(4))),
        ("dtype mismatch", lambda: dist._all_gather_base(torch.empty(4 * world, dtype=torch.int32), torch.ones(4))),
        ("uneven splits", lambda: dist.all_to_all_single(torch.empty(5), torch.ones(5))),
    ]
    for name, call in cases:
        try:
            call()
            msgs.append((name, None))
        except (RuntimeError, ValueError) as e:
            msgs.append((name, str(e).splitlines()[0]))
    # The group still works after refused calls (they never reach grove).
    t = torch.ones(3)
    dist.all_reduce(t)
    msgs.append(("still works", t.tolist()))
    return msgs


def test_bad_input_raises_clear_errors():
    results = harness.run_ranks(bad_input, 2)
    for msgs in results:
        d = dict(msgs)
        assert d.pop("still works") == [2.0, 2.0, 2.0]
        for name, text in d.items():
            assert text is not None, "%s did not raise" % name
            assert "grove" in text, "%s: %s" % (name, text)
        assert "BAND" in d["BAND on float"]
        assert "Short" in d["int16 dtype"]
