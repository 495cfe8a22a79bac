"""Builds and packages grove.torch, the "grove" backend of torch.distributed.

    pip install --no-build-isolation ./bindings/torch

The extension is built by grove's own CMake project (the repository root two
folders up) for the Python running pip, and the wheel carries the libgrove
it links, beside the extension (found through its $ORIGIN run path), so the
installed package needs nothing from the source tree. Needs cmake, a C++20
compiler, pybind11 and the torch development files (see README.md).
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class CMakeBuild(build_ext):
    """Configures grove with the torch backend on and builds only that target."""

    def build_extension(self, ext):
        if not os.path.exists(os.path.join(ROOT, "include", "grove", "grove.h")):
            sys.exit("grove.torch: build from a grove source tree (bindings/torch inside it); %s is not one" % ROOT)
        build = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        cmd = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DGROVE_BUILD_TESTS=OFF",
               "-DGROVE_BUILD_PERF=OFF", "-DGROVE_WITH_TORCH=ON", "-DGROVE_TORCH_PYTHON=" + sys.executable]
        if shutil.which("ninja"):
            cmd += ["-G", "Ninja"]
        if shutil.which("ccache"):
            cmd += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        subprocess.check_call(cmd)
        jobs = os.environ.get("GROVE_BUILD_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", build, "--target", "grove_torch", "-j", jobs])
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        built = glob.glob(os.path.join(build, "python", "grove", "torch", "_C*.so"))
        if not built:
            sys.exit("grove.torch: the CMake build made no extension (was torch found? see its output)")
        shutil.copy2(built[0], target)
        # The extension needs libgrove.so.0 (its SONAME); copy the real file.
        shutil.copy2(os.path.realpath(os.path.join(build, "lib", "libgrove.so.0")),
                     os.path.join(os.path.dirname(target), "libgrove.so.0"))


setup(
    name="grove-torch",
    version="0.1.0",
    description='The "grove" backend of torch.distributed',
    packages=["grove", "grove.torch"],
    package_dir={"": "."},
    ext_modules=[Extension("grove.torch._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.8",
    zip_safe=False,
)
