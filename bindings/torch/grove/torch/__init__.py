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
import inspect
import sys

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
    itself), with grove's backend registered on every device it serves,
    but only when grove is the group's one backend: in a mixed group
    ("cpu:gloo,cuda:grove") the creator returns the bare backend.
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


def _grove_on_every_device(depth=4):
    """Whether the group torch is building runs grove on all its devices.

    torch takes a ProcessGroup returned by a creator as the whole group and
    stops building it, so the named group may stand in only when no other
    backend shares it ("cpu:gloo,cuda:grove" must keep gloo on the CPU).
    torch passes the creator no backend string; its group builder holds it
    as the local `backend_config` a frame or two up. If no such frame is
    found (another torch), the answer is no: a bare backend is always safe,
    at the price of the group being named "custom".
    """
    config_type = getattr(_dist.distributed_c10d, "BackendConfig", None)
    frame = sys._getframe(1)
    for _ in range(depth):
        frame = frame.f_back
        if frame is None or config_type is None:
            return False
        config = frame.f_locals.get("backend_config")
        if isinstance(config, config_type):
            return set(config.get_device_backend_map().values()) == {BACKEND_NAME}
    return False


def _create(store, rank, size, timeout):
    """Creator torch.distributed calls for a "grove" backend (torch < 2.1)."""
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    backend = _C.ProcessGroupGrove(store, rank, size, timeout)
    if _C.TORCH_BACKEND_API and _grove_on_every_device():
        return group_of(backend, store, rank, size)
    return backend


def _create_extended(opts, backend_options=None):
    """Creator torch.distributed calls for a "grove" backend (torch >= 2.1).

    opts carries the group torch is building; the named group that stands
    in for it keeps its bound device (init_process_group(device_id=...)).
    """
    timeout = opts.timeout
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    backend = _C.ProcessGroupGrove(opts.store, opts.group_rank, opts.group_size, timeout)
    if not _grove_on_every_device():
        return backend
    pg = group_of(backend, opts.store, opts.group_rank, opts.group_size)
    parent = getattr(opts, "process_group", None)
    if parent is not None and parent.bound_device_id is not None:
        pg.bound_device_id = parent.bound_device_id
    return pg


def _register():
    if not _dist.is_available():
        raise ImportError("grove.torch: this torch was built without torch.distributed")
    if hasattr(_dist.Backend, BACKEND_NAME.upper()):
        return  # already registered (e.g. the module was reloaded)
    if not _C.TORCH_BACKEND_API:
        _dist.Backend.register_backend(BACKEND_NAME, _create)
        return
    # torch >= 2: the creator returns a Backend (or the group) that torch
    # wraps; say which devices it serves.
    params = inspect.signature(_dist.Backend.register_backend).parameters
    if "extended_api" in params:
        _dist.Backend.register_backend(
            BACKEND_NAME, _create_extended, extended_api=True, devices=_devices()
        )
    else:
        _dist.Backend.register_backend(BACKEND_NAME, _create, devices=_devices())


_register()
