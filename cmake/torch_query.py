"""Prints what grove's CMake build needs of the torch this Python imports.

One `key=value` line each: version, cxx11_abi (0/1), cuda (the CUDA version
torch was built with, or empty), include (;-separated header folders) and
libdir. Used by cmake/GroveTorch.cmake instead of find_package(Torch): a
pip-installed CUDA build of torch carries CMake files that demand a CUDA
toolkit even for a CPU-only extension, and this needs none.
"""
import os
import sys

import torch

root = os.path.dirname(torch.__file__)
include = [os.path.join(root, "include"),
           os.path.join(root, "include", "torch", "csrc", "api", "include")]
print("version=" + torch.__version__.split("+")[0])
print("cxx11_abi=%d" % int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))))
print("cuda=" + (torch.version.cuda or ""))
print("include=" + ";".join(p for p in include if os.path.isdir(p)))
print("libdir=" + os.path.join(root, "lib"))
sys.stdout.flush()
