// module.cc - the grove.torch._C Python module: the ProcessGroupGrove class
// (a torch ProcessGroup on torch 1.x, a Backend on torch 2.x) and the
// creator function grove/torch/__init__.py registers with torch.distributed.
#include "process_group_grove.h"

#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace py = pybind11;

namespace {

// GROVE_TORCH_CRASH_TRACE=1: on a fatal signal, print the native stack
// (module+offset per frame: addr2line -f -e <module> <offset> names it) to
// stderr, then hand the signal to whoever had it before (Python's
// faulthandler, say, which prints the Python stacks).
struct sigaction previousActions[32];

void crashTrace(int sig) {
  const char head[] = "grove.torch: fatal signal, native stack:\n";
  (void)!write(2, head, sizeof head - 1);
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  sigaction(sig, &previousActions[sig], nullptr);
  raise(sig);
}

void installCrashTrace() {
  const char* on = std::getenv("GROVE_TORCH_CRASH_TRACE");
  if (!on || std::string(on) != "1") return;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    struct sigaction act {};
    act.sa_handler = crashTrace;
    sigemptyset(&act.sa_mask);
    act.sa_flags = SA_NODEFER | SA_RESETHAND;
    sigaction(sig, &act, &previousActions[sig]);
  }
}

// Blocking waits of the backend (its destructor joining the worker thread)
// release the GIL when the caller holds it: the worker may need the GIL to
// free tensors Python knows, and the last reference to a process group can
// go from Python code (DDP's reducer) with the GIL held.
void withoutGil(const std::function<void()>& fn) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release release;
    fn();
  } else {
    fn();
  }
}

}  // namespace

// torch binds its c10d classes (Store, ProcessGroup, Backend) with
// c10::intrusive_ptr holders; declaring the same lets pybind11 pass them in
// and hand ours to torch.
PYBIND11_DECLARE_HOLDER_TYPE(T, c10::intrusive_ptr<T>, true);

PYBIND11_MODULE(_C, m) {
  using grove::pytorch::BackendBase;
  using grove::pytorch::ProcessGroupGrove;
  m.doc() = "grove's torch.distributed backend (native part; import grove.torch instead)";
  // The base class is registered by torch; make sure it is loaded.
  py::module_::import("torch.distributed");
  grove::pytorch::setBlockingScope(&withoutGil);
  installCrashTrace();

  py::class_<ProcessGroupGrove, c10::intrusive_ptr<ProcessGroupGrove>, BackendBase>(
      m, "ProcessGroupGrove")
      .def(py::init([](const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string& profilingName) {
             return ProcessGroupGrove::create(store, rank, size, timeout, profilingName);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("profiling_name") = "grove", py::call_guard<py::gil_scoped_release>(),
           "Joins a grove communicator of `size` ranks, meeting the others through `store`. "
           "profiling_name prefixes the profiler's events (\"grove:all_reduce\").")
      // new_group on a parent bound to a device: torch asks the parent's
      // backend of every non-member for a "no colour" split, because NCCL
      // splits collectively over the parent. grove's subgroups meet through
      // the store among their members alone, so a non-member has nothing to do.
      .def(
          "perform_nocolor_split", [](ProcessGroupGrove&, const py::object&) {}, py::arg("device"),
          "Nothing: a grove subgroup is made by its members alone (torch calls this on "
          "non-members when the parent group is bound to a device).");

  m.attr("TORCH_BACKEND_API") = grove::pytorch::kBackendApi;
  m.attr("CUDA_TENSORS") = static_cast<bool>(GROVE_TORCH_CUDA_PATH);
  m.def(
      "grove_version",
      [] {
        int v = 0;
        groveGetVersion(&v);
        return v;
      },
      "grove's version code (major * 10000 + minor * 100 + patch).");
}
