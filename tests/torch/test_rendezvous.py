"""Ranks meet through the c10d store of every init method torch offers
(env://, tcp://, file://, torchrun), several grove groups coexist, grove
shares a group with another backend ("cpu:grove,cuda:gloo" and the other
way round), and a group bound to a device makes subgroups."""
import os
import subprocess
import sys
import textwrap

import pytest

import harness
from harness import dist, torch


def sum_of_ranks(rank, world):
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    return t.item()


@pytest.mark.parametrize("init", ["env", "tcp", "file"])
def test_init_methods(init):
    world = 3
    assert harness.run_ranks(sum_of_ranks, world, init=init) == [3.0] * world


def subgroups(rank, world):
    # Two grove groups besides the default one (evens and odds), used
    # interleaved with it.
    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    odds = dist.new_group([r for r in range(world) if r % 2 == 1])
    mine = evens if rank % 2 == 0 else odds
    first = rank % 2  # the group's lowest global rank
    t = torch.tensor([rank])
    dist.all_reduce(t, group=mine)
    u = torch.tensor([rank])
    dist.all_reduce(u)
    v = torch.tensor([rank])
    dist.broadcast(v, src=first, group=mine)
    return t.item(), u.item(), v.item(), dist.get_backend(mine)


def test_subgroups_get_their_own_communicators():
    world = 4
    results = harness.run_ranks(subgroups, world)
    for rank, (t, u, v, backend) in enumerate(results):
        assert t == (0 + 2 if rank % 2 == 0 else 1 + 3)
        assert u == 6
        assert v == (1 if rank % 2 else 0)
        assert backend == "grove"


def backends_per_device(rank, world):
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    pg = dist.group.WORLD
    names = {d: type(pg._get_backend(torch.device(d))).__name__ for d in ("cpu", "cuda")}
    return t.item(), names, dist.get_backend()


@pytest.mark.skipif(not harness.grove_torch._C.TORCH_BACKEND_API, reason="torch < 2 has no per-device backends")
@pytest.mark.parametrize("spec,cpu,cuda", [("cpu:grove,cuda:gloo", "ProcessGroupGrove", "ProcessGroupGloo"),
                                           ("cpu:gloo,cuda:grove", "ProcessGroupGloo", "ProcessGroupGrove")])
def test_grove_shares_a_group_with_another_backend(spec, cpu, cuda):
    # Only a group that is grove's alone is grove's named group: in a mixed
    # one, torch registers each device's backend (the named group would stand
    # in for the whole group and lose the other backend).
    world = 2
    for total, names, backend in harness.run_ranks(backends_per_device, world, backend=spec):
        assert total == 3.0
        assert names == {"cpu": cpu, "cuda": cuda}, names
        assert backend == spec


def bound_subgroups(rank, world):
    default = dist.group.WORLD
    only_first = dist.new_group([0])  # rank 1 is not a member
    t = torch.tensor([float(rank + 1)])
    if rank == 0:
        dist.all_reduce(t, group=only_first)
    u = torch.tensor([float(rank + 1)])
    dist.all_reduce(u)
    dist.barrier()
    return str(default.bound_device_id), default.getBackendName(), t.item(), u.item()


@pytest.mark.skipif(not harness.grove_torch._C.TORCH_BACKEND_API, reason="torch < 2 has no bound devices")
def test_a_group_bound_to_a_device_makes_subgroups():
    # init_process_group(device_id=...) binds the group; torch then asks the
    # parent's backend on non-members of a new group for a "no colour" split.
    world = 2
    results = harness.run_ranks(bound_subgroups, world,
                                init_kwargs={"device_id": torch.device("cpu", 0)})
    assert results[0] == ("cpu:0", "grove", 1.0, 3.0)
    assert results[1] == ("cpu:0", "grove", 2.0, 3.0)


TORCHRUN_SCRIPT = textwrap.dedent("""
    import torch, torch.distributed as dist
    import grove.torch
    dist.init_process_group("grove")
    t = torch.ones(4) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    print("rank %d of %d: %s" % (dist.get_rank(), dist.get_world_size(), t.tolist()), flush=True)
    dist.destroy_process_group()
""")


def test_torchrun(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TORCHRUN_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # Static rendezvous on 127.0.0.1 (--standalone would look up "localhost",
    # which a machine without /etc/hosts cannot resolve).
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
         "--master_addr", "127.0.0.1", "--master_port", str(harness.free_port()), str(script)],
        env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in range(2):
        assert "rank %d of 2: [3.0, 3.0, 3.0, 3.0]" % rank in proc.stdout, proc.stdout + proc.stderr
