"""PyTorch's own distributed test suite on grove.

Runs DistributedTest._DistTestBase from torch/testing/_internal/distributed
(the suite upstream runs for gloo, nccl and mpi) from the installed torch,
with grove standing in for gloo: BACKEND=gloo keeps every test that upstream
runs on gloo, and the "gloo" backend plugin is replaced by one that makes a
grove process group.

    PYTHONPATH=build/python python tests/torch/upstream_suite.py [-v] [-k pattern]
    (or python -m pytest tests/torch/upstream_suite.py)

Environment: GROVE_SUITE_BACKEND=grove (default) or gloo (the real one, the
reference); WORLD_SIZE (default 2). tests/torch/test_upstream_suite.py runs
both backends on 2 and 3 ranks and fails on any test that passes on gloo and
not on grove. Tests that cannot pass with grove standing in for gloo are
skipped with the reason (STAND_IN_SKIPS).
"""
import os


def _backend():
    return os.environ.get("GROVE_SUITE_BACKEND", "grove")


def _use_grove_for_gloo():
    """Makes every "gloo" process group a grove one (in this process)."""
    import grove.torch  # registers "grove", loads the extension
    import torch.distributed as dist
    from grove.torch import _C

    def create(opts, backend_options):
        backend = _C.ProcessGroupGrove(opts.store, opts.group_rank, opts.group_size, opts.timeout,
                                       profiling_name="gloo")
        # The group names itself "grove", as every grove group does: DDP's
        # logger records that name (a group named "gloo" it would take for
        # ProcessGroupGloo and read gloo's settings from).
        return grove.torch.group_of(backend, opts.store, opts.group_rank, opts.group_size)

    # torch registers its built-in gloo creator lazily: replace the function
    # it will register, and the registration if it already happened.
    import torch.distributed.distributed_c10d as c10d
    c10d._create_gloo_process_group = create
    plugin = dist.Backend._plugins.get("GLOO")
    if plugin is not None:
        dist.Backend._plugins["GLOO"] = plugin._replace(creator_fn=create, extended_api=True)


# Tests that cannot pass with grove standing in for gloo, and why.
STAND_IN_SKIPS = {
    "test_ddp_logging_data_cpu": "expects DDP's logger to record the backend name \"gloo\" "
                                 "(it records \"grove\"; tests/torch/test_ddp.py checks the "
                                 "same fields on backend=\"grove\")",
}


# Set up before torch's suite loads (ranks are forked from this process).
os.environ["BACKEND"] = "gloo"
os.environ.setdefault("WORLD_SIZE", "2")
if _backend() == "grove":
    _use_grove_for_gloo()

import torch  # noqa: E402
from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


def _skip_stand_in_tests(cls):
    import unittest

    for name, why in STAND_IN_SKIPS.items():
        setattr(cls, name, unittest.skip("grove stands in for gloo: " + why)(getattr(cls, name)))
    return cls


class TestSuite(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        # Forked ranks: a spawned one would import torch again (seconds each).
        # The parent never makes a process group, so there is nothing to copy.
        self._start_processes(torch.multiprocessing.get_context("fork").Process)


if _backend() == "grove":
    _skip_stand_in_tests(TestSuite)


if __name__ == "__main__":
    run_tests()
