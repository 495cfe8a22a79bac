"""Runs a function on N ranks of a torch.distributed process group.

Each rank is a forked process (torch is imported once, by pytest) that joins
the group through the chosen init method, runs fn(rank, world, *args) and
sends back its result or its traceback. run_ranks() returns the results in
rank order, or raises naming every rank that failed.
"""
import multiprocessing as mp
import os
import pickle
import queue as queue_mod
import random
import socket
import tempfile
import time
import traceback
from datetime import timedelta

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (scripts/install-deps makes .venv with it)")
dist = pytest.importorskip("torch.distributed")
grove_torch = pytest.importorskip(
    "grove.torch", reason="grove.torch is not built (configure with Torch found; see bindings/torch/README.md)")

# Limit for a whole run of ranks; a healthy run takes seconds.
DEFAULT_DEADLINE_S = 180


def free_port():
    """A port free now, below the kernel's ephemeral range: the kernel hands
    ports of that range to every listener that binds port 0 (grove's own,
    in tests running beside this one), which could take it before the
    store binds it."""
    low = 20000
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = min(low, int(f.read().split()[0]) - 1000)
    except (OSError, ValueError, IndexError):
        pass
    for _ in range(200):
        port = random.randrange(max(1024, low - 10000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(rank, world, backend, init, fn, args, queue, extra_env, pg_timeout_s, init_kwargs):
    try:
        os.environ.update(extra_env)
        torch.set_num_threads(1)
        kwargs = dict(rank=rank, world_size=world, timeout=timedelta(seconds=pg_timeout_s),
                      **init_kwargs)
        if init == "env":
            kwargs["init_method"] = "env://"
        else:
            kwargs["init_method"] = init
        dist.init_process_group(backend, **kwargs)
        result = fn(rank, world, *args)
        if dist.is_initialized():
            dist.destroy_process_group()
        # Plain pickle: torch's multiprocessing pickler would pass tensors
        # through shared memory that dies with this process.
        queue.put((rank, "ok", pickle.dumps(result)))
    except BaseException:  # report everything, including assertion errors
        queue.put((rank, "error", traceback.format_exc()))
    finally:
        queue.close()
        queue.join_thread()


def run_ranks(fn, world, *args, backend="grove", init="file", deadline_s=DEFAULT_DEADLINE_S,
              extra_env=None, pg_timeout_s=120, allow_exit=(), init_kwargs=None):
    """Runs fn on `world` ranks; returns [result of rank 0, ...].

    init: "file" (a fresh file:// store), "tcp" (tcp:// on a free port) or
    "env" (env:// with MASTER_ADDR/MASTER_PORT). Ranks in allow_exit may end
    without reporting (a test that kills a rank); their result is None.
    init_kwargs: more arguments for init_process_group (e.g. device_id).
    """
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    env = dict(extra_env or {})
    with tempfile.TemporaryDirectory() as tmp:
        if init == "file":
            init = "file://" + os.path.join(tmp, "store")
        elif init == "tcp":
            init = "tcp://127.0.0.1:%d" % free_port()
        elif init == "env":
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        procs = [ctx.Process(target=_child, args=(r, world, backend, init, fn, args, queue, env, pg_timeout_s,
                                                       dict(init_kwargs or {})))
                 for r in range(world)]
        for p in procs:
            p.start()
        results, errors = {}, {}
        waiting = set(range(world)) - set(allow_exit)
        end = time.monotonic() + deadline_s
        try:
            while waiting:
                try:
                    rank, status, value = queue.get(timeout=max(0.1, end - time.monotonic()))
                except queue_mod.Empty:
                    break
                waiting.discard(rank)
                if status == "ok":
                    results[rank] = pickle.loads(value)
                else:
                    errors[rank] = value
        finally:
            for p in procs:
                p.join(timeout=10)
            for p in procs:
                if p.is_alive():
                    p.kill()
                    p.join()
    missing = [r for r in range(world) if r not in results and r not in errors and r not in allow_exit]
    if errors or missing:
        text = "".join("--- rank %d failed:\n%s" % (r, errors[r]) for r in sorted(errors))
        if missing:
            text += "--- ranks %s did not report within %d s\n" % (missing, deadline_s)
        raise AssertionError(text)
    return [results.get(r) for r in range(world)]
