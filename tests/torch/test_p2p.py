"""Point-to-point on the grove backend, as pipeline and model parallelism use
it: isend/irecv posted in both directions at once, irecv before send,
batch_isend_irecv rings, tags, receives from any source, messages of any
size, mixed with collectives; a receive that never gets its message raises
at its timeout. Every byte is checked. A peer that dies fails a posted
receive at once, and an aborted group refuses further sends."""
import os
import time

import pytest

import harness

torch = harness.torch
dist = harness.dist

SIZES = [0, 1, 1000, 1 << 20]  # elements; 4 MiB of float32 is four times a link's buffer


def fill(rank, n, salt=0):
    return torch.arange(n, dtype=torch.float32) + 1000.0 * rank + salt


def both_directions(rank, world):
    peer = 1 - rank
    for n in SIZES:
        out, got = fill(rank, n), torch.full((n,), -1.0)
        reqs = [dist.isend(out, peer), dist.irecv(got, peer)]
        for r in reqs:
            r.wait()
        assert torch.equal(got, fill(peer, n)), n
    return True


def recv_before_send(rank, world):
    peer = 1 - rank
    for n in SIZES:
        got = torch.full((n,), -1.0)
        req = dist.irecv(got, peer)
        dist.send(fill(rank, n, 7), peer)
        req.wait()
        assert torch.equal(got, fill(peer, n, 7)), n
    return True


def many_in_flight(rank, world):
    # 16 messages each way, all posted before any is waited for, sizes mixed
    peer = 1 - rank
    sizes = [(i * 37_003) % 300_001 for i in range(16)]
    gots = [torch.empty(n) for n in sizes]
    reqs = [dist.irecv(g, peer) for g in gots] + [dist.isend(fill(rank, n, i), peer) for i, n in enumerate(sizes)]
    for r in reqs:
        r.wait()
    return all(torch.equal(g, fill(peer, n, i)) for i, (g, n) in enumerate(zip(gots, sizes)))


def batch_ring(rank, world):
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    n = 300_007
    got = torch.empty(n)
    ops = [dist.P2POp(dist.isend, fill(rank, n), nxt), dist.P2POp(dist.irecv, got, prv)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    return torch.equal(got, fill(prv, n))


def tags_match(rank, world):
    # rank 0 sends tag 1 then tag 2; rank 1 receives tag 2 first.
    if rank == 0:
        dist.send(fill(0, 10, 1), 1, tag=1)
        dist.send(fill(0, 20, 2), 1, tag=2)
        return True
    second, first = torch.empty(20), torch.empty(10)
    dist.recv(second, 0, tag=2)
    dist.recv(first, 0, tag=1)
    return torch.equal(first, fill(0, 10, 1)) and torch.equal(second, fill(0, 20, 2))


def any_source(rank, world):
    if rank != 0:
        dist.send(fill(rank, 5000), 0)
        return True
    seen = {}
    for _ in range(world - 1):
        got = torch.empty(5000)
        src = dist.recv(got)  # from any source
        seen[src] = torch.equal(got, fill(src, 5000))
    return seen


def mixed_with_collectives(rank, world):
    peer = 1 - rank
    got = torch.empty(100_000)
    req_r = dist.irecv(got, peer)
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t)  # a collective while the receive is posted
    req_s = dist.isend(fill(rank, 100_000), peer)
    req_r.wait()
    req_s.wait()
    return torch.equal(got, fill(peer, 100_000)) and torch.equal(t, torch.full((1000,), 3.0))


def recv_never_sent(rank, world):
    if rank == 1:
        return "idle"
    req = dist.irecv(torch.empty(10), 1)
    try:
        req.wait(harness.timedelta(seconds=1))
    except RuntimeError as e:
        return str(e)
    return "no error"


@pytest.mark.parametrize("fn", [both_directions, recv_before_send, many_in_flight, tags_match,
                                mixed_with_collectives])
def test_two_ranks(fn):
    assert harness.run_ranks(fn, 2) == [True, True]


@pytest.mark.parametrize("world", [2, 3, 4])
def test_batch_isend_irecv_ring(world):
    assert harness.run_ranks(batch_ring, world) == [True] * world


@pytest.mark.parametrize("world", [2, 4])
def test_recv_from_any_source(world):
    seen = harness.run_ranks(any_source, world)[0]
    assert seen == {r: True for r in range(1, world)}


def test_recv_that_never_arrives_times_out():
    r0, r1 = harness.run_ranks(recv_never_sent, 2, pg_timeout_s=60, allow_exit=(1,))
    assert "Timed out after 1000 ms" in r0, r0


def peer_dies_mid_exchange(rank, world):
    peer = 1 - rank
    got = torch.empty(1000)
    dist.recv(got, peer) if rank == 0 else dist.send(fill(1, 1000), peer)  # the link is up
    if rank == 1:
        os._exit(3)  # dies without leaving the group
    start = time.monotonic()
    try:
        dist.recv(torch.empty(1 << 20), peer)  # never comes
        return ("no error",)
    except RuntimeError as e:
        return ("error", str(e), time.monotonic() - start)


def test_dead_peer_fails_a_posted_recv_at_once():
    # the group's timeout is 60 s: the error must come from the death, not the clock
    r0 = harness.run_ranks(peer_dies_mid_exchange, 2, allow_exit=(1,), pg_timeout_s=60)[0]
    assert r0[0] == "error", r0
    assert r0[2] < 30, "noticed after %.1f s" % r0[2]


def send_after_abort(rank, world):
    peer = 1 - rank
    work = dist.irecv(torch.empty(10), peer)  # never sent: times out and aborts the group
    try:
        work.wait(harness.timedelta(seconds=1))
    except RuntimeError:
        pass
    try:
        dist.send(torch.ones(10), peer)
        return "no error"
    except RuntimeError as e:
        return str(e)


def test_point_to_point_after_abort_raises():
    for text in harness.run_ranks(send_after_abort, 2, pg_timeout_s=60):
        assert "aborted" in text, text
