"""The project's own torch on grove's libnccl.so.2: run with grove's library
in LD_PRELOAD (nccl.cmake does), as a user replacing NCCL would.

torch's wheel links the NCCL of the nvidia-nccl-cu13 wheel; its
libtorch_cuda needs every nccl* function that NCCL exports, so a missing
one fails `import torch` itself. Checks:
- torch imports, and its nccl backend is available;
- grove's library is the one loaded, and the NCCL that torch's nccl
  backend reports at run time is grove's answer to ncclGetVersion;
- that answer is at least the NCCL torch was built against (NCCL's own
  rule: a newer library runs programs built against an older header).
Prints the figures. Exit 0 only if all hold."""
import ctypes
import os
import sys

grove_lib = os.path.realpath(sys.argv[1])
assert grove_lib in os.environ.get("LD_PRELOAD", ""), "run with grove's library in LD_PRELOAD"

import torch  # noqa: E402  (the import itself is the first check)
import torch.distributed as dist  # noqa: E402
from torch._C._distributed_c10d import ProcessGroupNCCL  # noqa: E402

failures = []


def expect(ok, what):
    if not ok:
        failures.append(what)
        print("torch_import: FAILED", what, flush=True)


loaded = {os.path.realpath(line.split()[-1]) for line in open("/proc/self/maps")
          if "/libnccl.so" in line}
expect(grove_lib in loaded, f"grove's {grove_lib} is loaded (loaded: {sorted(loaded)})")
expect(dist.is_nccl_available(), "torch's nccl backend is available")

version = ctypes.c_int(0)
lib = ctypes.CDLL(grove_lib)
expect(lib.ncclGetVersion(ctypes.byref(version)) == 0, "grove's ncclGetVersion")
code = version.value
grove = (code // 10000, code // 100 % 100, code % 100)
build = tuple(ProcessGroupNCCL.get_build_nccl_version())
runtime = tuple(ProcessGroupNCCL.get_runtime_nccl_version())
expect(runtime == grove, f"torch's runtime NCCL {runtime} is grove's answer {grove}")
expect(tuple(torch.cuda.nccl.version()) == build, "torch.cuda.nccl.version() is the build's")
expect(grove >= build, f"grove's NCCL {grove} is at least torch's build NCCL {build}")
print(f"torch_import: torch {torch.__version__} built against NCCL {build}, runs on grove's "
      f"libnccl.so.2 answering NCCL {grove}; {len(failures)} failed", flush=True)
sys.exit(1 if failures else 0)
