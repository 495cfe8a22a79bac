// staging.h - what the backend's collectives share: argument checks and
// the contiguous buffers grove calls need.
#pragma once

#include "comm.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace grove::pytorch {

/// A tensor and the contiguous buffer a grove call reads or writes for it:
/// the tensor itself when it is contiguous, else a copy (copyBack() writes a
/// copy's contents back).
struct Staged {
  at::Tensor user;  ///< the caller's tensor
  at::Tensor buf;   ///< contiguous: user, or a copy of it

  /// Stages t; `fill` copies t's contents into a fresh buffer.
  static Staged of(const at::Tensor& t, bool fill) {
    if (t.is_contiguous()) return Staged{t, t};
    return Staged{t, fill ? t.contiguous() : at::empty_like(t, at::MemoryFormat::Contiguous)};
  }
  /// Writes a copy's contents back to the caller's tensor.
  void copyBack() {
    if (!buf.is_same(user)) user.copy_(buf);
  }
  /// The buffer's first element.
  void* ptr() const { return buf.data_ptr(); }
};

/// Number of elements as grove's count.
inline size_t countOf(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

/// Exactly one tensor, checked (this backend has one device per process).
inline at::Tensor& single(std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "grove: ", op, " takes one tensor per process (got ",
              tensors.size(), ")");
  checkTensor(tensors[0], op);
  return tensors[0];
}

/// Checks that t has ref's dtype and `numel` elements.
inline void checkLike(const at::Tensor& t, const at::Tensor& ref, int64_t numel, const char* op,
                      const char* what) {
  checkTensor(t, op);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "grove: ", op, ": ", what, " has dtype ",
              t.scalar_type(), ", expected ", ref.scalar_type());
  TORCH_CHECK(t.device() == ref.device(), "grove: ", op, ": ", what, " is on ", t.device(),
              ", expected ", ref.device());
  TORCH_CHECK(t.numel() == numel, "grove: ", op, ": ", what, " has ", t.numel(),
              " elements, expected ", numel);
}

/// Checks a list of `n` tensors, each like ref with ref.numel() elements.
inline void checkList(const std::vector<at::Tensor>& list, const at::Tensor& ref, int n,
                      const char* op, const char* what) {
  TORCH_CHECK(static_cast<int>(list.size()) == n, "grove: ", op, ": ", what, " must hold ", n,
              " tensors (one per rank), got ", list.size());
  for (const auto& t : list) checkLike(t, ref, ref.numel(), op, what);
}

/// Concatenation of a list's tensors, flattened, as one contiguous buffer.
inline at::Tensor concat(const std::vector<at::Tensor>& list) {
  std::vector<at::Tensor> parts;
  parts.reserve(list.size());
  for (const auto& t : list) parts.push_back(t.reshape({-1}));
  return at::cat(parts);
}

/// Copies consecutive blocks of flat into the list's tensors (each block as
/// long as its tensor). Not "split": torch 2.x's c10d::Backend::split()
/// would hide it in members.
inline void scatterBlocks(const at::Tensor& flat, const std::vector<at::Tensor>& list) {
  int64_t offset = 0;
  for (const auto& t : list) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

/// A flat contiguous buffer of `blocks` copies of ref's shape.
inline at::Tensor flatOf(const at::Tensor& ref, int64_t blocks) {
  return at::empty({blocks * ref.numel()}, ref.options());
}

}  // namespace grove::pytorch
