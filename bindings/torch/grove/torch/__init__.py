"""The "grove" backend of torch.distributed.

Importing this package registers the backend, so that

    import grove.torch
    torch.distributed.init_process_group("grove", init_method=..., rank=..., world_size=...)

and DistributedDataParallel work with no other change. Ranks meet through the
c10d store torch gives the backend (rank 0 publishes grove's unique id), so
every init_method torch supports (env://, tcp://, file://, torchrun) works.
Tensors may be on the CPU or on a CUDA device (torch >= 2.5): operations on
CUDA tensors are queued on a grove stream after the work already on the
caller's current stream, as with torch's "nccl" backend, and Work.wait()
makes the caller's stream wait without blocking the host.
"""
import datetime

import torch
import torch.distributed as _dist

from . import _C

__all__ = ["ProcessGroupGrove", "BACKEND_NAME", "grove_version"]

#: The name to give init_process_group / new_group.
BACKEND_NAME = "grove"

ProcessGroupGrove = _C.ProcessGroupGrove
grove_version = _C.grove_version


class _GroveGroup(_dist.ProcessGroup):
    """The process group of backend="grove", named "grove".

    For a backend it does not know, torch makes a plain ProcessGroup, whose
    getBackendName() is "custom" (its backend type's name): DDP's logger
    then records backend_name "custom". The creator returns this subclass
    instead (torch takes a ProcessGroup a creator returns as the group
    itself), with grove's backend registered on every device it serves.
    """

    def getBackendName(self):
        return BACKEND_NAME


def _devices():
    return ["cpu", "cuda"] if _C.CUDA_TENSORS else ["cpu"]


def group_of(backend, store, rank, size, devices=None):
    """A ProcessGroup named "grove" that runs everything on `backend` (a
    ProcessGroupGrove), on `devices` (default: every device grove serves)."""
    pg = _GroveGroup(store, rank, size)
    custom = _dist.ProcessGroup.BackendType.CUSTOM
    pg._set_default_backend(custom)
    for device in devices if devices is not None else _devices():
        pg._register_backend(torch.device(device), custom, backend)
    return pg


def _create(store, rank, size, timeout):
    """Creator torch.distributed calls for every "grove" process group."""
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    backend = _C.ProcessGroupGrove(store, rank, size, timeout)
    return group_of(backend, store, rank, size) if _C.TORCH_BACKEND_API else backend


def _register():
    if not _dist.is_available():
        raise ImportError("grove.torch: this torch was built without torch.distributed")
    if hasattr(_dist.Backend, BACKEND_NAME.upper()):
        return  # already registered (e.g. the module was reloaded)
    if _C.TORCH_BACKEND_API:
        # torch >= 2: the creator returns a Backend that torch wraps; say
        # which devices it serves.
        _dist.Backend.register_backend(BACKEND_NAME, _create, devices=_devices())
    else:
        _dist.Backend.register_backend(BACKEND_NAME, _create)


_register()
