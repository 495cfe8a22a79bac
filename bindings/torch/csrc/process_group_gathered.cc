// process_group_gathered.cc - all-reduces that grove has no reduction for,
// done by gathering every rank's data and combining it on each rank (as
// gloo does for sparse tensors):
// - sparse COO tensors (sum): each rank's index and value arrays, padded to
//   the largest nnz, are all-gathered with their counts; every rank then
//   sums the n sparse tensors and coalesces the result into the caller's
//   tensor.
// - BAND, BOR and BXOR on integer tensors (and BXOR on bool): the dense
//   tensors are all-gathered and folded with the bitwise op.
// Both move n times the data of a direct all-reduce; they serve correctness
// for the rare callers, not speed.
#include "process_group_grove.h"

#include "staging.h"

namespace grove::pytorch {

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::allreduceSparse(
    at::Tensor& t, const ::c10d::AllreduceOptions& opts) {
  const char* name = "allreduce";
  TORCH_CHECK(t.layout() == at::kSparse, "grove: ", name, ": sparse tensors must be COO (got ",
              t.layout(), ")");
  TORCH_CHECK(t.device().is_cpu(), "grove: ", name, ": sparse tensors must be on the CPU");
  TORCH_CHECK(opts.reduceOp.op_ == ::c10d::ReduceOp::SUM, "grove: ", name,
              " of sparse tensors supports SUM only");
  groveTypeOf(t._values(), name);
  const int n = getSize();
  at::Tensor tensor = t;
  return enqueue(
      ::c10d::OpType::ALLREDUCE, name, {t}, opTimeout(opts.timeout), [=](const Exec& x) mutable {
        at::Tensor in = tensor.coalesce();
        const int64_t sparseDim = in.sparse_dim();
        at::Tensor indices = in._indices().contiguous();  // [sparseDim, nnz]
        at::Tensor values = in._values().contiguous();    // [nnz, dense...]
        int64_t nnz = in._nnz();
        at::Tensor counts = at::empty({n}, at::kLong);
        x.check(groveAllGather(&nnz, counts.data_ptr(), 1, groveInt64, x.comm(), x.stream), name);
        const int64_t most = counts.max().item<int64_t>();
        std::vector<int64_t> valueShape = values.sizes().vec();
        valueShape[0] = most;
        at::Tensor idxPad = at::zeros({sparseDim, most}, at::kLong);
        at::Tensor valPad = at::zeros(valueShape, values.options());
        if (nnz > 0) {
          idxPad.narrow(1, 0, nnz).copy_(indices);
          valPad.narrow(0, 0, nnz).copy_(values);
        }
        std::vector<int64_t> allIdxShape = {n, sparseDim, most};
        std::vector<int64_t> allValShape = valueShape;
        allValShape.insert(allValShape.begin(), n);
        at::Tensor allIdx = at::empty(allIdxShape, at::kLong);
        at::Tensor allVal = at::empty(allValShape, values.options());
        x.check(groveAllGather(idxPad.data_ptr(), allIdx.data_ptr(), countOf(idxPad), groveInt64,
                               x.comm(), x.stream),
                name);
        x.check(groveAllGather(valPad.data_ptr(), allVal.data_ptr(), countOf(valPad),
                               groveTypeOf(valPad, name), x.comm(), x.stream),
                name);
        std::vector<at::Tensor> idxParts, valParts;
        for (int r = 0; r < n; ++r) {
          const int64_t k = counts[r].item<int64_t>();
          idxParts.push_back(allIdx[r].narrow(1, 0, k));
          valParts.push_back(allVal[r].narrow(0, 0, k));
        }
        at::Tensor sum = at::sparse_coo_tensor(at::cat(idxParts, 1), at::cat(valParts, 0),
                                               tensor.sizes(), values.options().layout(at::kSparse))
                             .coalesce();
        tensor.copy_(sum);
      });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupGrove::allreduceBitwise(
    at::Tensor& t, const ::c10d::AllreduceOptions& opts) {
  const char* name = "allreduce";
  checkTensor(t, name);
  const auto kind = opts.reduceOp.op_;
  const auto type = t.scalar_type();
  TORCH_CHECK(at::isIntegralType(type, /*includeBool=*/true), "grove: ", name,
              ": BAND, BOR and BXOR need integer or bool tensors (got ", type, ")");
  const int n = getSize();
  at::Tensor tensor = t;
  return enqueue(::c10d::OpType::ALLREDUCE, name, {t}, opTimeout(opts.timeout),
                 [=](const Exec& x) mutable {
                   at::Tensor in = tensor.contiguous();
                   at::Tensor all = at::empty({n, in.numel()}, in.options());
                   x.check(groveAllGather(in.data_ptr(), all.data_ptr(), countOf(in),
                                          groveTypeOf(in, name), x.comm(), x.stream),
                           name);
                   at::Tensor acc = all[0].clone();
                   for (int r = 1; r < n; ++r) {
                     if (kind == ::c10d::ReduceOp::BAND)
                       acc.bitwise_and_(all[r]);
                     else if (kind == ::c10d::ReduceOp::BOR)
                       acc.bitwise_or_(all[r]);
                     else
                       acc.bitwise_xor_(all[r]);
                   }
                   tensor.copy_(acc.view(tensor.sizes()));
                 });
}

}  // namespace grove::pytorch
