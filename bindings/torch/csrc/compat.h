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

// CUDA tensors (cuda_path.h) need c10::Stream::native_handle() (torch 2.5 on).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
#define GROVE_TORCH_CUDA_PATH 1
#else
#define GROVE_TORCH_CUDA_PATH 0
#endif

// Backend::split (dist.split_group) and Backend::shrink (dist.shrink_group).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9)
#define GROVE_TORCH_SPLIT 1
#else
#define GROVE_TORCH_SPLIT 0
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 10)
#define GROVE_TORCH_SHRINK 1
#else
#define GROVE_TORCH_SHRINK 0
#endif

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
