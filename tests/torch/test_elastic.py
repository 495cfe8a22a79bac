"""Elastic process groups on backend="grove": dist.split_group, and
dist.shrink_group after a rank dies (SHRINK_ABORT) or on a healthy group
(SHRINK_DEFAULT); abort() fails the pending Work at once."""
import os
import time

import pytest

import harness
from harness import dist, torch

pytestmark = pytest.mark.skipif(
    not hasattr(dist, "split_group") or not hasattr(dist, "shrink_group"),
    reason="this torch has no dist.split_group / dist.shrink_group")


def split_in_two(rank, world):
    evens = [r for r in range(world) if r % 2 == 0]
    odds = [r for r in range(world) if r % 2 == 1]
    sub = dist.split_group(split_ranks=[evens, odds])
    mine = evens if rank % 2 == 0 else odds
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t, group=sub)
    expected = float(sum(r + 1 for r in mine))
    return (dist.get_rank(sub), dist.get_world_size(sub), bool((t == expected).all()))


def test_split_group_makes_working_subgroups():
    world = 4
    results = harness.run_ranks(split_in_two, world, pg_timeout_s=60)
    for rank in range(world):
        sub_rank, sub_size, exact = results[rank]
        assert sub_size == 2 and sub_rank == rank // 2, results[rank]
        assert exact, "rank %d: the subgroup's all-reduce is wrong" % rank


def shrink_after_death(rank, world):
    t = torch.ones(1 << 14)
    dist.all_reduce(t)  # everyone is up
    if rank == world - 1:
        os._exit(3)  # dies without leaving the group
    try:
        for _ in range(200):
            dist.all_reduce(t)
            time.sleep(0.01)
        return ("no error",)
    except RuntimeError:
        pass
    start = time.monotonic()
    group = dist.shrink_group([world - 1], shrink_flags=dist.distributed_c10d.SHRINK_ABORT)
    u = torch.full((1 << 14,), float(dist.get_rank(group) + 1))
    dist.all_reduce(u, group=group)
    n = dist.get_world_size(group)
    return ("shrunk", n, bool((u == n * (n + 1) / 2).all()), time.monotonic() - start)


def test_shrink_group_after_a_death():
    world = 3
    results = harness.run_ranks(shrink_after_death, world, allow_exit=(world - 1,),
                                pg_timeout_s=60)
    for rank in range(world - 1):
        status, n, exact, seconds = results[rank]
        assert status == "shrunk" and n == world - 1, results[rank]
        assert exact, "rank %d: the shrunk group's all-reduce is wrong" % rank
        assert seconds < 10, "rank %d took %.1f s to shrink" % (rank, seconds)


def shrink_healthy(rank, world):
    t = torch.ones(100)
    dist.all_reduce(t)
    if rank == 0:  # left out: takes no part, leaves when the others are done
        time.sleep(1)
        return ("left out",)
    group = dist.shrink_group([0])
    u = torch.full((100,), float(dist.get_rank(group) + 1))
    dist.all_reduce(u, group=group)
    n = dist.get_world_size(group)
    return ("shrunk", n, bool((u == n * (n + 1) / 2).all()))


def test_shrink_group_default_mode_leaves_a_rank_out():
    results = harness.run_ranks(shrink_healthy, 3, pg_timeout_s=60)
    assert results[0] == ("left out",)
    for rank in (1, 2):
        assert results[rank] == ("shrunk", 2, True), results[rank]


def abort_pending(rank, world):
    t = torch.ones(10)
    dist.all_reduce(t)
    if rank == 1:
        time.sleep(2)  # never joins the next all-reduce
        return ("idle",)
    work = dist.all_reduce(t, async_op=True)
    time.sleep(0.2)
    start = time.monotonic()
    dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu")).abort()
    try:
        work.wait()
        return ("no error",)
    except RuntimeError as e:
        return ("error", str(e), time.monotonic() - start)


def test_abort_fails_the_pending_work_at_once():
    results = harness.run_ranks(abort_pending, 2, pg_timeout_s=60)
    status, text, seconds = results[0]
    assert status == "error" and "abort() was called" in text, results[0]
    assert seconds < 5, "abort took %.1f s" % seconds
