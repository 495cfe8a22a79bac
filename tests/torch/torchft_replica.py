"""One torchft replica group (of one process) for test_torchft.py.

Trains a small MLP with torchft's Manager, its DDP wrapper and its optimizer
wrapper over the process group named by --backend ("grove":
grove.torch.torchft.ProcessGroupGrove, "gloo": torchft's ProcessGroupGloo),
and appends one JSON line per iteration to --log:

    {"t": wall time, "step": manager step after the iteration,
     "committed": whether the step was committed, "participants": n}

It stops after committing a step >= --steps in which both replicas took part
(so a replica that was killed and restarted has rejoined: both stop at the
same step with the same parameters) and saves the parameters to --out.
--slow-from-step makes this replica slow from that step on, so that a test
kills it while the other waits in the step's all-reduce: it writes the step
to "<--log>.sleeping" as each slow sleep begins. --max-seconds
bounds the run when the other replica never comes back. With --start-file,
training waits for that file after the Manager is up (so that both replicas
of a test are in the first quorum) and writes "<--log>.ready" first.
"""
import argparse
import json
import logging
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn, optim
from torchft.checkpointing import HTTPTransport
from torchft.ddp import DistributedDataParallel
from torchft.manager import Manager
from torchft.optim import OptimizerWrapper


LOOPBACK = "127.0.0.1"


class LoopbackHTTPTransport(HTTPTransport):
    """torchft's checkpoint server, named by the loopback address (torchft
    names it by socket.gethostname())."""

    def address(self):
        port = self._server.socket.getsockname()[1]
        return f"http://{LOOPBACK}:{port}/checkpoint/"


def make_group(backend, timeout):
    if backend == "grove":
        from grove.torch.torchft import ProcessGroupGrove

        return ProcessGroupGrove(timeout=timeout)
    from torchft.process_group import ProcessGroupGloo

    if backend == "gloo":
        return ProcessGroupGloo(timeout=timeout)

    # "gloo-future-errors": torchft's gloo group with its Works' errors
    # left to their futures, as grove's group does (a like-for-like
    # comparison of recovery).
    from grove.torch.torchft import LeaveErrorsToFutures

    class GlooFutureErrors(LeaveErrorsToFutures, ProcessGroupGloo):
        pass

    return GlooFutureErrors(timeout=timeout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", choices=["grove", "gloo", "gloo-future-errors"], required=True)
    p.add_argument("--replica", type=int, required=True)
    p.add_argument("--lighthouse", required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--max-seconds", type=float, default=200.0)
    p.add_argument("--start-file")
    p.add_argument("--slow-from-step", type=int, default=-1,
                   help="from this step on, sleep --slow-seconds before each backward "
                        "(the other replica waits in its all-reduce meanwhile)")
    p.add_argument("--slow-seconds", type=float, default=0.5)
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--log", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    torch.set_num_threads(1)

    # Loopback addresses throughout: a host name (even "localhost") need not
    # resolve in a container.
    store = dist.TCPStore(LOOPBACK, 0, is_master=True, wait_for_workers=False)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8))
    inner = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def state_dict():
        return {"model": model.state_dict(), "optim": inner.state_dict()}

    def load_state_dict(sd):
        model.load_state_dict(sd["model"])
        inner.load_state_dict(sd["optim"])

    timeout = timedelta(seconds=a.timeout)
    manager = Manager(
        pg=make_group(a.backend, timeout),
        min_replica_size=1,
        load_state_dict=load_state_dict,
        state_dict=state_dict,
        replica_id=f"replica_{a.replica}",
        store_addr=LOOPBACK,
        store_port=store.port,
        rank=0,
        world_size=1,
        lighthouse_addr=a.lighthouse,
        hostname=LOOPBACK,
        checkpoint_transport=LoopbackHTTPTransport(timeout=timeout, num_chunks=0),
        timeout=timeout,
        quorum_timeout=timedelta(seconds=60),
        connect_timeout=timeout,
    )
    ddp = DistributedDataParallel(manager, model)
    optimizer = OptimizerWrapper(manager, inner)
    loss_fn = nn.MSELoss()

    if a.start_file:
        open(a.log + ".ready", "w").close()
        while not os.path.exists(a.start_file):
            time.sleep(0.01)
    give_up = time.monotonic() + a.max_seconds
    with open(a.log, "a", buffering=1) as log:
        while time.monotonic() < give_up:
            # Each replica's batch depends on the step and the replica, so the
            # averaged gradient is the same whoever computes it.
            g = torch.Generator().manual_seed(1000 * manager.current_step() + a.replica)
            x = torch.randn(32, 64, generator=g)
            y = torch.randn(32, 8, generator=g)
            optimizer.zero_grad()  # starts the quorum
            loss = loss_fn(ddp(x), y)
            if 0 <= a.slow_from_step <= manager.current_step():
                with open(a.log + ".sleeping", "w") as marker:
                    marker.write(str(manager.current_step()))
                time.sleep(a.slow_seconds)
            loss.backward()
            committed = manager.should_commit()
            if committed:
                inner.step()
            n = manager.num_participants()
            step = manager.current_step()
            log.write(json.dumps({"t": time.time(), "step": step, "committed": committed,
                                  "participants": n}) + "\n")
            if committed and step >= a.steps and n == 2:
                break
        else:
            print(f"replica {a.replica}: no step >= {a.steps} with both replicas in "
                  f"{a.max_seconds} s", file=sys.stderr)
            manager.shutdown(wait=False)
            return 3
    torch.save({"step": manager.current_step(),
                "params": {k: v.clone() for k, v in model.state_dict().items()}}, a.out)
    manager.shutdown(wait=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
