"""Errors surface as Python exceptions instead of hangs: a peer that dies,
a peer that stops answering (Work.wait timeout aborts the communicator), and
a collective after the process group was aborted; a wait timeout bounds the
operation, not the callbacks chained on its future."""
import os
import time
from datetime import timedelta

import harness
from harness import dist, torch


def peer_dies(rank, world):
    t = torch.ones(1000)
    dist.all_reduce(t)  # everyone is up
    if rank == world - 1:
        os._exit(3)  # dies without leaving the group
    time.sleep(0.5)
    start = time.monotonic()
    try:
        for _ in range(50):
            dist.all_reduce(t)
        return ("no error", None)
    except RuntimeError as e:
        return ("error", str(e), time.monotonic() - start)


def test_dead_peer_raises_on_the_others():
    world = 3
    results = harness.run_ranks(peer_dies, world, allow_exit=(world - 1,), pg_timeout_s=60)
    for rank in range(world - 1):
        status, text = results[rank][:2]
        assert status == "error", "rank %d: collectives kept working after a peer died" % rank
        assert "grove" in text and "allreduce" in text, text
        # Death is noticed by the bootstrap root, not by the 60 s timeout.
        assert results[rank][2] < 50, "rank %d took %.1f s to notice" % (rank, results[rank][2])


def silent_peer(rank, world):
    t = torch.ones(10)
    dist.all_reduce(t)
    if rank == 1:
        time.sleep(3)  # rank 0 gives up after 1 s and aborts the communicator
        try:
            dist.all_reduce(t)
            return ("no error",)
        except RuntimeError as e:
            return ("error", str(e))
    work = dist.all_reduce(t, async_op=True)
    try:
        work.wait(timeout=timedelta(seconds=1))
        return ("no timeout",)
    except RuntimeError as e:
        first = str(e)
    try:
        dist.all_reduce(torch.ones(10))  # the group is aborted: fails at once
        return ("usable after abort",)
    except RuntimeError as e:
        return ("timeout", first, str(e))


def test_wait_timeout_aborts_the_communicator():
    r0, r1 = harness.run_ranks(silent_peer, 2, pg_timeout_s=60)
    assert r0[0] == "timeout", r0
    assert "Timed out after 1000 ms" in r0[1] and "aborted" in r0[1], r0[1]
    assert "grove" in r0[2], r0[2]
    # The abort reached the silent rank: its next collective fails too.
    assert r1[0] == "error", r1
    assert "grove" in r1[1], r1[1]


def slow_callback(rank, world):
    t = torch.ones(10)
    dist.all_reduce(t)
    if rank == 1:
        time.sleep(0.5)  # rank 0's callback is chained before the op ends
        dist.all_reduce(t)
        dist.all_reduce(t)
        return ("ok",)
    work = dist.all_reduce(t, async_op=True)
    ran = []
    # Runs on grove's worker thread when the all-reduce ends, for 2 s.
    chained = work.get_future().then(lambda f: (time.sleep(2), ran.append(1), f.value())[-1])
    start = time.monotonic()
    work.wait(timeout=timedelta(seconds=1))  # bounds the op, not the callback
    waited = time.monotonic() - start
    dist.all_reduce(t)  # the group was not aborted
    return ("ok", waited, ran, chained.done(), t[0].item())


def test_wait_timeout_bounds_the_operation_not_the_futures_callbacks():
    r0, r1 = harness.run_ranks(slow_callback, 2, pg_timeout_s=60)
    assert r1 == ("ok",)
    status, waited, ran, done, value = r0
    # wait() returned after the callback (the future is complete then), and
    # the callback's 2 s did not count against the 1 s timeout.
    assert ran == [1] and done and waited >= 2.0, r0
    assert value == 8.0, r0
