"""grove as a torchft process group: ``grove.torch.torchft.ProcessGroupGrove``.

torchft (fault-tolerant training across replica groups) rebuilds its
process groups on every quorum change: its Manager calls
``configure(store_addr, replica_id, rank, world_size, ...)`` with a fresh
store prefix each time, after aborting the previous group. This class is
the same shape as torchft's own ``ProcessGroupGloo``: a
``torchft.process_group.ProcessGroupWrapper`` whose ``_create_pg`` builds a
c10d ProcessGroup with grove's backend registered on the CPU (and on CUDA
when the extension was built with CUDA tensors and a GPU is present).

    from torchft import Manager
    from grove.torch.torchft import ProcessGroupGrove

    manager = Manager(pg=ProcessGroupGrove(), ...)

What grove gives torchft: a dead replica fails the pending all-reduce on
every survivor within milliseconds (no collective timeout to wait out),
``abort()`` never blocks (it fails the pending Work at once), and a
configure's init is bounded by the wrapper's timeout.

Errors reach torchft through the Work's future, not through ``wait()``:
torchft's Manager turns a failed future into "this step is not committed"
(``Manager.wrap_future``), but an exception out of ``wait()`` escapes its
DDP communication hook and ends the training process. So the Works this
group hands out wait until the operation ended, failed or not, and leave
the error to the future (which grove completes before the Work).

torchft is optional: importing this module without it raises ImportError
naming the package; ``import grove.torch`` never needs it.
"""
from datetime import timedelta
from typing import Optional

import torch

try:
    from torchft.process_group import ProcessGroupWrapper
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "grove.torch.torchft needs the torchft package (pip install torchft)"
    ) from e

import torch.distributed as dist
from torch.distributed import ProcessGroup as BaseProcessGroup

from . import _C, group_of

__all__ = ["ProcessGroupGrove", "LeaveErrorsToFutures"]


class _FutureErrorWork(dist._Work):
    """A grove Work whose wait() leaves the operation's error to its future."""

    def __init__(self, work: dist._Work, record) -> None:
        super().__init__()
        self._work = work
        self._record = record

    def wait(self, timeout: Optional[timedelta] = None) -> bool:
        try:
            if timeout is None:
                self._work.wait()
            else:
                self._work.wait(timeout)
        except RuntimeError as e:
            # The future holds the same error (or, after a timeout, the
            # error of the communicator's abort); on CUDA tensors the future
            # may have completed when the work was queued, so the group
            # also remembers it for errored(), which the Manager asks
            # before it commits a step.
            self._record(e)
        return True

    def get_future(self) -> torch.futures.Future:
        return self._work.get_future()

    def is_completed(self) -> bool:
        return self._work.is_completed()

    def is_success(self) -> bool:
        return self._work.is_success()

    def exception(self):
        return self._work.exception()

    def abort(self) -> None:
        self._work.abort()


class LeaveErrorsToFutures:
    """A mixin for a torchft ProcessGroupWrapper: its Works leave errors to
    their futures (``_FutureErrorWork``), and ``errored()`` reports the
    first error a ``wait()`` left behind since the last configure, so that
    the Manager does not commit that step even where the future said
    success (CUDA tensors: the future completes when the work is queued)."""

    _errored: Optional[Exception] = None

    def configure(self, *args, **kwargs) -> None:
        # After the old group's abort, whose failed Works are not the new
        # group's errors.
        super().configure(*args, **kwargs)
        self._errored = None

    def _wrap_work(self, work: dist._Work, opts: object) -> dist._Work:
        return _FutureErrorWork(work, self._record_error)

    def _record_error(self, error: Exception) -> None:
        if self._errored is None:
            self._errored = error

    def errored(self) -> Optional[Exception]:
        return self._errored


class ProcessGroupGrove(LeaveErrorsToFutures, ProcessGroupWrapper):
    """A reconfigurable grove process group for torchft's Manager.

    Args:
        timeout: bounds each configure's rendezvous and every collective
            (grove's timeout for the communicator it makes).
    """

    def __init__(self, timeout: timedelta = timedelta(seconds=60)) -> None:
        super().__init__(timeout=timeout)

    def _create_pg(self, store, rank: int, world_size: int) -> BaseProcessGroup:
        backend = _C.ProcessGroupGrove(store, rank, world_size, self._timeout)
        devices = ["cpu"]
        if _C.CUDA_TENSORS and torch.cuda.is_available():
            devices.append("cuda")
        return group_of(backend, store, rank, world_size, devices)

    def getBackendName(self) -> str:
        return "torchft-grove"
