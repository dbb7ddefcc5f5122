/*
 * collectives.cpp - each torch op as nexar's nonblocking call.  Shapes are checked here
 * (nexar counts elements; torch passes lists of tensors), temporaries are made where
 * torch's layout is not nexar's (a list of tensors for one buffer), and the Work copies
 * out of them once the op completed.
 */
#include "process_group.hpp"

#include "convert.hpp"

namespace nexar_torch {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

/* Internal tag of the uneven all_to_all's sends; torch's own tags stay below it. */
static constexpr uint32_t kExchangeTag = 0x7fffff00u;

static const at::Tensor& one(const std::vector<at::Tensor>& ts, const NexarWork& w)
{
  TORCH_CHECK(ts.size() == 1, "nexar ", w.what(), ": one tensor per call (got ", ts.size(),
              ")");
  return ts[0];
}

static void same_kind(const at::Tensor& a, const at::Tensor& b, const NexarWork& w)
{
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "nexar ", w.what(), ": tensors of ",
              a.scalar_type(), " and ", b.scalar_type());
}

static void divide_after(NexarWork& w, const at::Tensor& t, int size)
{
  at::Tensor d = t;
  w.then([d, size]() mutable { d.div_(size); });
}

/* role ("root", "peer") r as a rank of a group of size. */
static int rank_in(int64_t r, const char* role, int size, const NexarWork& w)
{
  TORCH_CHECK(r >= 0 && r < size, "nexar ", w.what(), ": ", role, " ", r,
              " is not a rank of the group");
  return (int)r;
}

WorkPtr ProcessGroupNexar::allreduce(std::vector<at::Tensor>& tensors,
                                     const c10d::AllreduceOptions& opts)
{
  auto w = start(OpType::ALLREDUCE, "allreduce", tensors);
  const at::Tensor& t = one(tensors, *w);
  bool avg;
  nexar_dtype_t dt = dtype_of(t, w->what());
  nexar_op_t op = op_of(opts.reduceOp, t, w->what(), &avg);
  void* p = data(*w, t, true);
  nexar_request_t* req = nullptr;
  take(*w, nexar_iall_reduce(comm_, p, (size_t)t.numel(), dt, op, &req), req);
  if (avg)
    divide_after(*w, t, getSize());
  return queue(w);
}

WorkPtr ProcessGroupNexar::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                               const c10d::AllreduceCoalescedOptions& opts)
{
  auto w = start(OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors);
  TORCH_CHECK(!tensors.empty(), "nexar ", w->what(), ": no tensors");
  bool avg;
  nexar_dtype_t dt = dtype_of(tensors[0], w->what());
  nexar_op_t op = op_of(opts.reduceOp, tensors[0], w->what(), &avg);
  std::vector<nexar_iov_t> iov;
  for (const at::Tensor& t : tensors) {
    same_kind(tensors[0], t, *w);
    iov.push_back({data(*w, t, true), (size_t)t.numel()});
  }
  nexar_request_t* req = nullptr;
  take(*w, nexar_iall_reduce_bucketed(comm_, iov.data(), iov.size(), dt, op, &req), req);
  if (avg)
    for (const at::Tensor& t : tensors)
      divide_after(*w, t, getSize());
  return queue(w);
}

WorkPtr ProcessGroupNexar::broadcast(std::vector<at::Tensor>& tensors,
                                     const c10d::BroadcastOptions& opts)
{
  auto w = start(OpType::BROADCAST, "broadcast", tensors);
  const at::Tensor& t = one(tensors, *w);
  TORCH_CHECK(opts.rootTensor == 0, "nexar ", w->what(), ": rootTensor must be 0");
  int root = rank_in(opts.rootRank, "root", getSize(), *w);
  nexar_dtype_t dt = dtype_of(t, w->what());
  void* p = data(*w, t, true);
  nexar_request_t* req = nullptr;
  take(*w, nexar_ibroadcast(comm_, p, (size_t)t.numel(), dt, root, &req), req);
  return queue(w);
}

WorkPtr ProcessGroupNexar::reduce(std::vector<at::Tensor>& tensors,
                                  const c10d::ReduceOptions& opts)
{
  auto w = start(OpType::REDUCE, "reduce", tensors);
  const at::Tensor& t = one(tensors, *w);
  TORCH_CHECK(opts.rootTensor == 0, "nexar ", w->what(), ": rootTensor must be 0");
  int root = rank_in(opts.rootRank, "root", getSize(), *w);
  bool avg;
  nexar_dtype_t dt = dtype_of(t, w->what());
  nexar_op_t op = op_of(opts.reduceOp, t, w->what(), &avg);
  bool at_root = getRank() == root;
  void* p = data(*w, t, at_root);
  nexar_request_t* req = nullptr;
  take(*w, nexar_ireduce(comm_, p, at_root ? p : nullptr, (size_t)t.numel(), dt, op, root,
                         &req), req);
  if (avg && at_root)
    divide_after(*w, t, getSize());
  return queue(w);
}

/* A contiguous tensor of n x t's elements, to gather into or scatter from. */
static at::Tensor flat_for(const at::Tensor& t, int n)
{
  return at::empty({(int64_t)n * t.numel()}, t.options().memory_format(at::MemoryFormat::Contiguous));
}

/* After the op: list[i] gets block i of flat. */
static void unflatten_after(NexarWork& w, const at::Tensor& flat,
                            const std::vector<at::Tensor>& list)
{
  at::Tensor f = flat;
  std::vector<at::Tensor> out = list;
  w.then([f, out]() mutable {
    int64_t n = out.empty() ? 0 : out[0].numel();
    for (size_t i = 0; i < out.size(); i++)
      out[i].copy_(f.narrow(0, (int64_t)i * n, n).view(out[i].sizes()));
  });
}

/* Each tensor of list has t's type and element count; the list has size of them. */
static void check_list(const std::vector<at::Tensor>& list, const at::Tensor& t, int size,
                       const NexarWork& w)
{
  TORCH_CHECK((int)list.size() == size, "nexar ", w.what(), ": a list of ", list.size(),
              " tensors for a group of ", size);
  for (const at::Tensor& x : list) {
    same_kind(t, x, w);
    check_host(x, w.what());
    TORCH_CHECK(x.numel() == t.numel(), "nexar ", w.what(), ": a tensor of ", x.numel(),
                " elements in the list, the input has ", t.numel());
  }
}

WorkPtr ProcessGroupNexar::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                     std::vector<at::Tensor>& inputs,
                                     const c10d::AllgatherOptions&)
{
  auto w = start(OpType::ALLGATHER, "allgather", outputs.size() == 1 ? outputs[0]
                                                                      : std::vector<at::Tensor>{});
  const at::Tensor& t = one(inputs, *w);
  TORCH_CHECK(outputs.size() == 1, "nexar ", w->what(), ": one output list per call");
  check_list(outputs[0], t, getSize(), *w);
  nexar_dtype_t dt = dtype_of(t, w->what());
  at::Tensor flat = flat_for(t, getSize());
  w->keep(flat);
  nexar_request_t* req = nullptr;
  take(*w, nexar_iall_gather(comm_, data(*w, t, false), flat.data_ptr(), (size_t)t.numel(),
                             dt, &req), req);
  unflatten_after(*w, flat, outputs[0]);
  return queue(w);
}

WorkPtr ProcessGroupNexar::_allgather_base(at::Tensor& output, at::Tensor& input,
                                           const c10d::AllgatherOptions&)
{
  auto w = start(OpType::_ALLGATHER_BASE, "_allgather_base", {output});
  same_kind(input, output, *w);
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "nexar ", w->what(),
              ": the output holds ", output.numel(), " elements, not size x ", input.numel());
  nexar_dtype_t dt = dtype_of(input, w->what());
  nexar_request_t* req = nullptr;
  take(*w, nexar_iall_gather(comm_, data(*w, input, false), data(*w, output, true),
                             (size_t)input.numel(), dt, &req), req);
  return queue(w);
}

WorkPtr ProcessGroupNexar::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                  std::vector<at::Tensor>& inputs,
                                  const c10d::GatherOptions& opts)
{
  auto w = start(OpType::GATHER, "gather", outputs.size() == 1 ? outputs[0]
                                                                : std::vector<at::Tensor>{});
  const at::Tensor& t = one(inputs, *w);
  int root = rank_in(opts.rootRank, "root", getSize(), *w);
  nexar_dtype_t dt = dtype_of(t, w->what());
  void* recv = nullptr;
  if (getRank() == root) {
    TORCH_CHECK(outputs.size() == 1, "nexar ", w->what(), ": one output list at the root");
    check_list(outputs[0], t, getSize(), *w);
    at::Tensor flat = flat_for(t, getSize());
    w->keep(flat);
    recv = flat.data_ptr();
    unflatten_after(*w, flat, outputs[0]);
  } else {
    TORCH_CHECK(outputs.empty(), "nexar ", w->what(), ": outputs are for the root only");
  }
  nexar_request_t* req = nullptr;
  take(*w, nexar_igather(comm_, data(*w, t, false), recv, (size_t)t.numel(), dt, root, &req),
       req);
  return queue(w);
}

WorkPtr ProcessGroupNexar::scatter(std::vector<at::Tensor>& outputs,
                                   std::vector<std::vector<at::Tensor>>& inputs,
                                   const c10d::ScatterOptions& opts)
{
  auto w = start(OpType::SCATTER, "scatter", outputs);
  const at::Tensor& t = one(outputs, *w);
  int root = rank_in(opts.rootRank, "root", getSize(), *w);
  nexar_dtype_t dt = dtype_of(t, w->what());
  const void* send = nullptr;
  if (getRank() == root) {
    TORCH_CHECK(inputs.size() == 1, "nexar ", w->what(), ": one input list at the root");
    check_list(inputs[0], t, getSize(), *w);
    std::vector<at::Tensor> flat_parts;
    for (const at::Tensor& x : inputs[0])
      flat_parts.push_back(x.reshape({-1}));
    at::Tensor flat = at::cat(flat_parts);
    w->keep(flat);
    send = flat.data_ptr();
  } else {
    TORCH_CHECK(inputs.empty(), "nexar ", w->what(), ": inputs are for the root only");
  }
  nexar_request_t* req = nullptr;
  take(*w, nexar_iscatter(comm_, send, data(*w, t, true), (size_t)t.numel(), dt, root, &req),
       req);
  return queue(w);
}

WorkPtr ProcessGroupNexar::reduce_scatter(std::vector<at::Tensor>& outputs,
                                          std::vector<std::vector<at::Tensor>>& inputs,
                                          const c10d::ReduceScatterOptions& opts)
{
  auto w = start(OpType::REDUCE_SCATTER, "reduce_scatter", outputs);
  const at::Tensor& t = one(outputs, *w);
  TORCH_CHECK(inputs.size() == 1, "nexar ", w->what(), ": one input list per call");
  check_list(inputs[0], t, getSize(), *w);
  bool avg;
  nexar_dtype_t dt = dtype_of(t, w->what());
  nexar_op_t op = op_of(opts.reduceOp, t, w->what(), &avg);
  std::vector<at::Tensor> parts;
  for (const at::Tensor& x : inputs[0])
    parts.push_back(x.reshape({-1}));
  at::Tensor flat = at::cat(parts);
  w->keep(flat);
  nexar_request_t* req = nullptr;
  take(*w, nexar_ireduce_scatter(comm_, flat.data_ptr(), data(*w, t, true), (size_t)t.numel(),
                                 dt, op, &req), req);
  if (avg)
    divide_after(*w, t, getSize());
  return queue(w);
}

WorkPtr ProcessGroupNexar::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                const c10d::ReduceScatterOptions& opts)
{
  auto w = start(OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {output});
  same_kind(input, output, *w);
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "nexar ", w->what(),
              ": the input holds ", input.numel(), " elements, not size x ", output.numel());
  bool avg;
  nexar_dtype_t dt = dtype_of(output, w->what());
  nexar_op_t op = op_of(opts.reduceOp, output, w->what(), &avg);
  nexar_request_t* req = nullptr;
  take(*w, nexar_ireduce_scatter(comm_, data(*w, input, false), data(*w, output, true),
                                 (size_t)output.numel(), dt, op, &req), req);
  if (avg)
    divide_after(*w, output, getSize());
  return queue(w);
}

/* torch's splits (rows of dim 0 per rank; empty: even) as one tensor per rank. */
static std::vector<at::Tensor> split_rows(const at::Tensor& t, std::vector<int64_t> splits,
                                          int size, const NexarWork& w)
{
  if (splits.empty()) {
    TORCH_CHECK(t.dim() > 0 && t.size(0) % size == 0, "nexar ", w.what(),
                ": dim 0 of a tensor of ", t.sizes(), " does not split into ", size);
    splits.assign(size, t.size(0) / size);
  }
  TORCH_CHECK((int)splits.size() == size, "nexar ", w.what(), ": ", splits.size(),
              " split sizes for a group of ", size);
  std::vector<at::Tensor> parts;
  int64_t at_row = 0;
  for (int64_t n : splits) {
    TORCH_CHECK(n >= 0 && at_row + n <= (t.dim() ? t.size(0) : 0), "nexar ", w.what(),
                ": the split sizes exceed dim 0 of a tensor of ", t.sizes());
    parts.push_back(t.narrow(0, at_row, n));
    at_row += n;
  }
  TORCH_CHECK(at_row == t.size(0), "nexar ", w.what(), ": the split sizes add up to ",
              at_row, " rows of ", t.size(0));
  return parts;
}

WorkPtr ProcessGroupNexar::alltoall_base(at::Tensor& output, at::Tensor& input,
                                         std::vector<int64_t>& output_splits,
                                         std::vector<int64_t>& input_splits,
                                         const c10d::AllToAllOptions&)
{
  auto w = start(OpType::ALLTOALL_BASE, "alltoall_base", {output});
  same_kind(input, output, *w);
  nexar_dtype_t dt = dtype_of(input, w->what());
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK(input.numel() == output.numel() && input.numel() % getSize() == 0,
                "nexar ", w->what(), ": input and output must both hold size x count "
                "elements (", input.numel(), " and ", output.numel(), ")");
    nexar_request_t* req = nullptr;
    take(*w, nexar_iall_to_all(comm_, data(*w, input, false), data(*w, output, true),
                               (size_t)(input.numel() / getSize()), dt, &req), req);
    return queue(w);
  }
  exchange(*w, split_rows(input, input_splits, getSize(), *w),
           split_rows(output, output_splits, getSize(), *w));
  return queue(w);
}

WorkPtr ProcessGroupNexar::alltoall(std::vector<at::Tensor>& outputs,
                                    std::vector<at::Tensor>& inputs,
                                    const c10d::AllToAllOptions&)
{
  auto w = start(OpType::ALLTOALL, "alltoall", outputs);
  TORCH_CHECK((int)inputs.size() == getSize() && (int)outputs.size() == getSize(), "nexar ",
              w->what(), ": ", inputs.size(), " inputs and ", outputs.size(),
              " outputs for a group of ", getSize());
  exchange(*w, inputs, outputs);
  return queue(w);
}

/* all_to_all with blocks of any size: nexar's all_to_all takes one count, so uneven
 * blocks go as sends and receives, in the same order on every rank, which is what
 * matches them (per source and tag, in order). */
void ProcessGroupNexar::exchange(NexarWork& w, const std::vector<at::Tensor>& sends,
                                 const std::vector<at::Tensor>& recvs)
{
  int me = getRank(), n = getSize();
  for (int j = 0; j < n; j++) {
    same_kind(sends[0], sends[j], w);
    same_kind(sends[0], recvs[j], w);
  }
  nexar_dtype_t dt = dtype_of(sends[0], w.what());
  TORCH_CHECK(recvs[me].numel() == sends[me].numel(), "nexar ", w.what(), ": this rank "
              "sends itself ", sends[me].numel(), " elements and expects ", recvs[me].numel());
  check_host(sends[me], w.what());
  check_host(recvs[me], w.what());
  at::Tensor self_in = sends[me].clone();
  w.keep(self_in);
  for (int k = 1; k < n; k++) {
    int to = (me + k) % n, from = (me - k + n) % n;
    nexar_request_t* req = nullptr;
    take(w, nexar_irecv(comm_, data(w, recvs[from], true), (size_t)recvs[from].numel(), dt,
                        from, kExchangeTag, &req), req);
    req = nullptr;
    take(w, nexar_isend(comm_, data(w, sends[to], false), (size_t)sends[to].numel(), dt, to,
                        kExchangeTag, &req), req);
  }
  at::Tensor self_out = recvs[me];
  w.then([self_out, self_in]() mutable { self_out.copy_(self_in.view(self_out.sizes())); });
}

WorkPtr ProcessGroupNexar::barrier(const c10d::BarrierOptions&)
{
  auto w = start(OpType::BARRIER, "barrier", {});
  nexar_request_t* req = nullptr;
  take(*w, nexar_ibarrier(comm_, &req), req);
  return queue(w);
}

static uint32_t tag_of(int tag, const NexarWork& w)
{
  TORCH_CHECK(tag >= 0 && (uint32_t)tag < kExchangeTag, "nexar ", w.what(), ": tag ", tag,
              " is outside 0..", kExchangeTag - 1);
  return (uint32_t)tag;
}

WorkPtr ProcessGroupNexar::send(std::vector<at::Tensor>& tensors, int dst, int tag)
{
  auto w = start(OpType::SEND, "send", {});
  const at::Tensor& t = one(tensors, *w);
  int peer = rank_in(dst, "peer", getSize(), *w);
  nexar_dtype_t dt = dtype_of(t, w->what());
  nexar_request_t* req = nullptr;
  take(*w, nexar_isend(comm_, data(*w, t, false), (size_t)t.numel(), dt, peer,
                       tag_of(tag, *w), &req), req);
  return queue(w);
}

WorkPtr ProcessGroupNexar::recv(std::vector<at::Tensor>& tensors, int src, int tag)
{
  auto w = start(OpType::RECV, "recv", tensors);
  const at::Tensor& t = one(tensors, *w);
  int peer = rank_in(src, "peer", getSize(), *w);
  nexar_dtype_t dt = dtype_of(t, w->what());
  nexar_request_t* req = nullptr;
  take(*w, nexar_irecv(comm_, data(*w, t, true), (size_t)t.numel(), dt, peer,
                       tag_of(tag, *w), &req), req);
  return queue(w);
}

WorkPtr ProcessGroupNexar::recvAnysource(std::vector<at::Tensor>&, int)
{
  TORCH_CHECK(false, "nexar recv (rank ", getRank(), " of ", getSize(), "): a receive from "
              "any source is not supported: nexar matches receives by (source, tag)");
}

} // namespace nexar_torch
