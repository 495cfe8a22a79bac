// process_group_gather.cc - the gathering and scattering operations of
// ProcessGroupGrove: all-gather, gather, scatter, reduce-scatter and
// all-to-all, in their list and flat ("_base") forms. List forms stage
// through one flat buffer (grove's layout: block r belongs to rank r);
// uneven and list all-to-all are a group of sends and receives.
#include "process_group_grove.h"

#include "staging.h"

namespace grove::pytorch {

namespace {

// Runs `calls` (sends and receives) as one grove group; ends the group even
// when a call throws, so grove's group nesting stays balanced.
template <typename F>
void runGroup(const Exec& x, const char* name, F calls) {
  x.check(groveGroupStart(), name);
  std::exception_ptr error;
  try {
    calls();
  } catch (...) {
    error = std::current_exception();
  }
  groveResult_t end = groveGroupEnd();
  if (error) std::rethrow_exception(error);
  x.check(end, name);
}

// Split sizes along dim 0: the given ones (checked), or an even split.
std::vector<int64_t> splitsOf(const std::vector<int64_t>& given, const at::Tensor& t, int n,
                              const char* what) {
  int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (given.empty()) {
    TORCH_CHECK(rows % n == 0, "grove: alltoall_base: ", what, " has ", rows,
                " rows, not divisible by the group size ", n);
    return std::vector<int64_t>(n, rows / n);
  }
  TORCH_CHECK(static_cast<int>(given.size()) == n, "grove: alltoall_base: ", what,
              " split sizes hold ", given.size(), " entries, expected ", n);
  int64_t sum = 0;
  for (int64_t s : given) {
    TORCH_CHECK(s >= 0, "grove: alltoall_base: negative split size in ", what);
    sum += s;
  }
  TORCH_CHECK(sum == rows, "grove: alltoall_base: ", what, " split sizes add up to ", sum,
              " but the tensor has ", rows, " rows");
  return given;
}

}  // namespace

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions& opts) {
  at::Tensor in = single(inputs, "allgather").contiguous();
  TORCH_CHECK(outputs.size() == 1, "grove: allgather takes one output list per process");
  checkList(outputs[0], in, getSize(), "allgather", "the output list");
  std::vector<at::Tensor> list = outputs[0];
  int n = getSize();
  return enqueue(
      ::c10d::OpType::ALLGATHER, "allgather", list, opTimeout(opts.timeout),
      [=](const Exec& x) {
        at::Tensor flat = flatOf(in, n);
        x.check(groveAllGather(in.data_ptr(), flat.data_ptr(), countOf(in),
                               groveTypeOf(in, "allgather"), x.comm(), x.stream),
                "allgather");
        scatterBlocks(flat, list);
      },
      inputs);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::_allgather_base(
    at::Tensor& output, at::Tensor& input, const ::c10d::AllgatherOptions& opts) {
  const char* name = "_allgather_base";
  checkTensor(input, name);
  checkLike(output, input, input.numel() * getSize(), name, "the output");
  at::Tensor in = input.contiguous();
  Staged out = Staged::of(output, false);
  return enqueue(::c10d::OpType::_ALLGATHER_BASE, name, {output}, opTimeout(opts.timeout),
                 [=](const Exec& x) mutable {
                   x.check(groveAllGather(in.data_ptr(), out.ptr(), countOf(in),
                                          groveTypeOf(in, name), x.comm(), x.stream),
                           name);
                   out.copyBack();
                 });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::GatherOptions& opts) {
  at::Tensor in = single(inputs, "gather").contiguous();
  int root = checkRoot(opts.rootRank, "gather");
  bool isRoot = getRank() == root;
  std::vector<at::Tensor> list;
  if (isRoot) {
    TORCH_CHECK(outputs.size() == 1, "grove: gather takes one output list on the root");
    checkList(outputs[0], in, getSize(), "gather", "the output list");
    list = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "grove: gather: only the root passes output tensors");
  }
  int n = getSize();
  return enqueue(::c10d::OpType::GATHER, "gather", list, opTimeout(opts.timeout),
                 [=](const Exec& x) {
                   at::Tensor flat = isRoot ? flatOf(in, n) : at::Tensor();
                   x.check(
                       groveGather(in.data_ptr(), isRoot ? flat.data_ptr() : nullptr, countOf(in),
                                   groveTypeOf(in, "gather"), root, x.comm(), x.stream),
                       "gather");
                   if (isRoot) scatterBlocks(flat, list);
                 },
                 {in});
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const ::c10d::ScatterOptions& opts) {
  at::Tensor out = single(outputs, "scatter");
  int root = checkRoot(opts.rootRank, "scatter");
  bool isRoot = getRank() == root;
  std::vector<at::Tensor> list;
  if (isRoot) {
    TORCH_CHECK(inputs.size() == 1, "grove: scatter takes one input list on the root");
    checkList(inputs[0], out, getSize(), "scatter", "the input list");
    list = inputs[0];
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "grove: scatter: only the root passes input tensors");
  }
  Staged s = Staged::of(out, false);
  return enqueue(::c10d::OpType::SCATTER, "scatter", {out}, opTimeout(opts.timeout),
                 [=](const Exec& x) mutable {
                   at::Tensor flat = isRoot ? concat(list) : at::Tensor();
                   x.check(groveScatter(isRoot ? flat.data_ptr() : nullptr, s.ptr(), countOf(out),
                                        groveTypeOf(out, "scatter"), root, x.comm(), x.stream),
                           "scatter");
                   s.copyBack();
                 });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const ::c10d::ReduceScatterOptions& opts) {
  at::Tensor out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "grove: reduce_scatter takes one input list per process");
  checkList(inputs[0], out, getSize(), "reduce_scatter", "the input list");
  groveRedOp_t op = groveOpOf(opts.reduceOp, out, "reduce_scatter");
  std::vector<at::Tensor> list = inputs[0];
  Staged s = Staged::of(out, false);
  return enqueue(
      ::c10d::OpType::REDUCE_SCATTER, "reduce_scatter", {out}, opTimeout(opts.timeout),
      [=](const Exec& x) mutable {
        at::Tensor flat = concat(list);
        x.check(groveReduceScatter(flat.data_ptr(), s.ptr(), countOf(out),
                                   groveTypeOf(out, "reduce_scatter"), op, x.comm(), x.stream),
                "reduce_scatter");
        s.copyBack();
      });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts) {
  const char* name = "_reduce_scatter_base";
  checkTensor(output, name);
  checkLike(input, output, output.numel() * getSize(), name, "the input");
  groveRedOp_t op = groveOpOf(opts.reduceOp, output, name);
  at::Tensor in = input.contiguous();
  Staged s = Staged::of(output, false);
  return enqueue(::c10d::OpType::_REDUCE_SCATTER_BASE, name, {output}, opTimeout(opts.timeout),
                 [=](const Exec& x) mutable {
                   x.check(groveReduceScatter(in.data_ptr(), s.ptr(), countOf(s.buf),
                                              groveTypeOf(in, name), op, x.comm(), x.stream),
                           name);
                   s.copyBack();
                 });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
    std::vector<int64_t>& inputSplits, const ::c10d::AllToAllOptions& opts) {
  const char* name = "alltoall_base";
  checkTensor(input, name);
  checkLike(output, input, output.numel(), name, "the output");
  TORCH_CHECK(!output.is_alias_of(input), "grove: ", name, ": input and output must not overlap");
  int n = getSize();
  auto inSplits = splitsOf(inputSplits, input, n, "the input");
  auto outSplits = splitsOf(outputSplits, output, n, "the output");
  bool even = inputSplits.empty() && outputSplits.empty();
  TORCH_CHECK(!even || input.numel() == output.numel(), "grove: ", name,
              ": input and output must have the same number of elements");
  int64_t inRow = input.dim() == 0 || input.size(0) == 0 ? 0 : input.numel() / input.size(0);
  int64_t outRow = output.dim() == 0 || output.size(0) == 0 ? 0 : output.numel() / output.size(0);
  at::Tensor in = input.contiguous();
  Staged out = Staged::of(output, false);
  return enqueue(
      ::c10d::OpType::ALLTOALL_BASE, name, {output}, opTimeout(opts.timeout),
      [=](const Exec& x) mutable {
        groveDataType_t type = groveTypeOf(in, name);
        if (even) {
          x.check(
              groveAlltoAll(in.data_ptr(), out.ptr(), countOf(in) / n, type, x.comm(), x.stream),
              name);
        } else {
          auto* src = static_cast<char*>(in.data_ptr());
          auto* dst = static_cast<char*>(out.ptr());
          size_t elem = in.element_size();
          runGroup(x, name, [&] {
            int64_t inOff = 0, outOff = 0;
            for (int peer = 0; peer < n; ++peer) {
              size_t sendCount = inSplits[peer] * inRow, recvCount = outSplits[peer] * outRow;
              x.check(groveSend(src + inOff * elem, sendCount, type, peer, x.comm(), x.stream),
                      name);
              x.check(groveRecv(dst + outOff * elem, recvCount, type, peer, x.comm(), x.stream),
                      name);
              inOff += sendCount;
              outOff += recvCount;
            }
          });
        }
        out.copyBack();
      });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::alltoall(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const ::c10d::AllToAllOptions& opts) {
  const char* name = "alltoall";
  int n = getSize();
  TORCH_CHECK(static_cast<int>(inputs.size()) == n && static_cast<int>(outputs.size()) == n,
              "grove: alltoall takes ", n, " input and ", n, " output tensors (one per rank)");
  std::vector<at::Tensor> ins;
  std::vector<Staged> outs;
  for (int j = 0; j < n; ++j) {
    checkLike(inputs[j], inputs[0], inputs[j].numel(), name, "every input");
    checkLike(outputs[j], inputs[0], outputs[j].numel(), name, "every output");
    ins.push_back(inputs[j].contiguous());
    outs.push_back(Staged::of(outputs[j], false));
  }
  return enqueue(
      ::c10d::OpType::ALLTOALL, name, outputs, opTimeout(opts.timeout), [=](const Exec& x) mutable {
        groveDataType_t type = groveTypeOf(ins[0], name);
        runGroup(x, name, [&] {
          for (int peer = 0; peer < n; ++peer) {
            x.check(
                groveSend(ins[peer].data_ptr(), countOf(ins[peer]), type, peer, x.comm(), x.stream),
                name);
            x.check(groveRecv(outs[peer].ptr(), countOf(outs[peer].buf), type, peer, x.comm(),
                              x.stream),
                    name);
          }
        });
        for (auto& s : outs) s.copyBack();
      });
}

}  // namespace grove::pytorch
