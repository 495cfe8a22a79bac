// compat.h - the one place where the torch versions differ.
//
// PyTorch 1.x backends subclass c10d::ProcessGroup; PyTorch 2.x split that
// class into a ProcessGroup front (made by Python) and a c10d::Backend that a
// plugin provides. The collectives have the same signatures in both, so the
// backend class derives from BackendBase and everything else is shared.
#pragma once

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace grove::pytorch {

#if TORCH_VERSION_MAJOR >= 2
/// The class a torch.distributed backend derives from (torch >= 2).
using BackendBase = ::c10d::Backend;
/// True when the Python side wraps the backend in its own ProcessGroup.
inline constexpr bool kBackendApi = true;
#else
/// The class a torch.distributed backend derives from (torch 1.x).
using BackendBase = ::c10d::ProcessGroup;
/// True when the Python side wraps the backend in its own ProcessGroup.
inline constexpr bool kBackendApi = false;
#endif

}  // namespace grove::pytorch
