"""All-reduces grove has no reduction for, done by gathering (see
bindings/torch/csrc/process_group_gathered.cc): BAND/BOR/BXOR on integer and
bool tensors, sparse tensors (sum), and DDP with sparse gradients
(nn.EmbeddingBag(sparse=True)) against the same run on gloo."""
import pytest

import harness
from harness import dist, torch

OPS = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}


def value(rank, dtype, n=1000):
    g = torch.Generator().manual_seed(rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    return torch.randint(0, 120, (n,), generator=g).to(dtype)


def bitwise(rank, world):
    out = {}
    for dtype in (torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool):
        for name in OPS:
            t = value(rank, dtype)
            dist.all_reduce(t, op=getattr(dist.ReduceOp, name))
            out[(str(dtype), name)] = t
    try:
        dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BXOR)
        out["float"] = "no error"
    except RuntimeError as e:
        out["float"] = str(e)
    return out


def sparse_sum(rank, world):
    # rank r holds entries at rows r, r+1 (overlapping its neighbours'), 3 dense columns
    idx = torch.tensor([[rank, rank + 1]])
    vals = torch.tensor([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]]) * (rank + 1)
    t = torch.sparse_coo_tensor(idx, vals, (world + 1, 3))
    dist.all_reduce(t)
    return t.to_dense()


def sparse_ddp(rank, world):
    gloo = dist.new_group(backend="gloo")
    results = []
    for group in (None, gloo):
        torch.manual_seed(0)
        model = torch.nn.EmbeddingBag(50, 8, mode="sum", sparse=True)
        ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(rank)
        for _ in range(5):
            opt.zero_grad()
            ids = torch.randint(0, 50, (16, 4), generator=g)
            ddp(ids).pow(2).sum().backward()
            opt.step()
        results.append(model.weight.detach().clone())
    return results


@pytest.mark.parametrize("world", [2, 3])
def test_bitwise_ops(world):
    results = harness.run_ranks(bitwise, world)
    for key in results[0]:
        if key == "float":
            continue
        dtype = getattr(torch, key[0].split(".")[1])
        want = value(0, dtype)
        for r in range(1, world):
            want = OPS[key[1]](want, value(r, dtype))
        for r in range(world):
            assert torch.equal(results[r][key], want), (key, r)
    assert "BAND, BOR and BXOR need integer or bool tensors" in results[0]["float"]


def test_sparse_all_reduce_sum():
    world = 3
    results = harness.run_ranks(sparse_sum, world)
    want = torch.zeros(world + 1, 3)
    for r in range(world):
        want[r] += torch.tensor([1.0, 2.0, 3.0]) * (r + 1)
        want[r + 1] += torch.tensor([10.0, 20.0, 30.0]) * (r + 1)
    for r in range(world):
        assert torch.equal(results[r], want), r


def test_ddp_with_sparse_gradients_matches_gloo():
    for grove_w, gloo_w in harness.run_ranks(sparse_ddp, 2):
        assert torch.allclose(grove_w, gloo_w, rtol=1e-6, atol=1e-6), (grove_w - gloo_w).abs().max()
