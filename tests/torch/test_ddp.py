"""DistributedDataParallel on the grove backend matches the same run on gloo.

Every rank trains two DDP copies of one small model for 20 steps, one over
the grove process group (the default group) and one over a gloo group, on
the same data. gloo sums in its own order, so the float runs must agree to
float tolerance. A run whose sums are exact must agree bit for bit: a single
linear layer under a linear loss on integer data has integer gradients
(whatever its weights), DDP divides them by a power-of-two world size, and
every sum of those is exact in float64 in any order.
"""
import pytest

import harness
from harness import dist, torch
import ddp_model

STEPS = 20


def grove_vs_gloo(rank, world, integer):
    gloo = dist.new_group(backend="gloo")
    kw = dict(integer=integer, lr=2.0 ** -10 if integer else 0.05,
              dtype=torch.float64 if integer else torch.float32, bias=not integer,
              depth=0 if integer else 2)
    grove_params, grove_losses = ddp_model.train(rank, STEPS, **kw)
    gloo_params, gloo_losses = ddp_model.train(rank, STEPS, group=gloo, **kw)
    # Ranks must also agree with each other (DDP keeps replicas identical).
    everyone = [torch.empty_like(grove_params) for _ in range(world)]
    dist.all_gather(everyone, grove_params)
    same_across_ranks = all(torch.equal(everyone[0], p) for p in everyone)
    return grove_params, gloo_params, grove_losses, gloo_losses, same_across_ranks


@pytest.mark.parametrize("world", [2, 3, 4])
def test_ddp_matches_gloo(world):
    results = harness.run_ranks(grove_vs_gloo, world, False)
    for rank, (grove_p, gloo_p, grove_l, gloo_l, same) in enumerate(results):
        assert same, "rank %d: replicas differ across ranks" % rank
        assert torch.allclose(grove_p, gloo_p, rtol=1e-5, atol=1e-6), \
            "rank %d: max |grove - gloo| = %g" % (rank, (grove_p - gloo_p).abs().max())
        assert grove_l == pytest.approx(gloo_l, rel=1e-5, abs=1e-6)
        assert sum(grove_l[-5:]) < sum(grove_l[:5]), "the model did not train"


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_exact_sums_match_gloo_bitwise(world):
    results = harness.run_ranks(grove_vs_gloo, world, True)
    for rank, (grove_p, gloo_p, grove_l, gloo_l, same) in enumerate(results):
        assert same
        assert torch.equal(grove_p, gloo_p), \
            "rank %d: %d parameters differ" % (rank, int((grove_p != gloo_p).sum()))
        assert grove_l == gloo_l


def ddp_outlives_group(rank, world):
    model = ddp_model.make_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    x, y = ddp_model.batch(rank, 0)
    torch.nn.functional.mse_loss(ddp(x), y).backward()
    dist.destroy_process_group()
    # DDP's reducer now holds the last reference to the grove group: freeing
    # it (with the GIL held) must finish the group's work, not deadlock.
    del ddp
    return True


def test_ddp_outlives_its_process_group():
    assert harness.run_ranks(ddp_outlives_group, 2, deadline_s=60) == [True, True]


def ddp_logging_data(rank, world):
    net = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 5))
    model = torch.nn.parallel.DistributedDataParallel(net)
    for _ in range(3):
        model(torch.randn(4, 10)).sum().backward()
    d = model._get_ddp_logging_data()
    size = sum(p.numel() * p.element_size() for p in net.parameters())
    return {"backend_name": d.get("backend_name"), "get_backend": dist.get_backend(),
            "group_name": dist.group.WORLD.name(), "world_size": d.get("world_size"),
            "rank": d.get("rank"), "module_name": d.get("module_name"),
            "bucket_cap_bytes": d.get("bucket_cap_bytes"),
            "total_parameter_size_bytes": d.get("total_parameter_size_bytes"),
            "expected_size": size, "gloo_num_threads": d.get("gloo_num_threads")}


def test_ddp_logs_the_grove_backend():
    """DDP's own logger records the group's backend as "grove" (the name
    dist.get_backend gives), with the fields torch's test_ddp_logging_data_cpu
    checks; nothing of gloo's."""
    results = harness.run_ranks(ddp_logging_data, 2)
    for rank, d in enumerate(results):
        assert d["backend_name"] == d["get_backend"] == d["group_name"] == "grove", d
        assert (d["world_size"], d["rank"], d["module_name"]) == (2, rank, "Sequential"), d
        assert d["bucket_cap_bytes"] == 25 * 1024 * 1024, d
        assert d["total_parameter_size_bytes"] == d["expected_size"], d
        assert d["gloo_num_threads"] is None, d
