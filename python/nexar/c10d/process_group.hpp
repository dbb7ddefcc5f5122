/*
 * process_group.hpp - ProcessGroupNexar: torch.distributed's process group over one nexar
 * communicator.
 *
 * Every op is submitted from the calling thread as a nonblocking nexar call (so ops keep
 * the program's order on every rank, which is what matches them) and returns a Work that
 * the group's Completer finishes.  Host tensors only; what nexar cannot do is refused
 * before anything is submitted, with a message naming the op and the rank.
 */
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "work.hpp"

namespace nexar_torch {

class ProcessGroupNexar : public c10d::ProcessGroup {
 public:
  /* rank and size are torch's; global_ranks the world ranks of the group (empty for
   * the default group).  Joins the nexar job on first use (nexar_init). */
  ProcessGroupNexar(int rank, int size, std::chrono::milliseconds timeout,
                    const std::vector<int64_t>& global_ranks);
  ~ProcessGroupNexar() override;

  const std::string getBackendName() const override { return "nexar"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;

  /* Completes what is in flight and lets go of the communicator (interpreter exit). */
  void close();

 private:
  /* A new Work of this group's rank; refuses when the group is closed. */
  c10::intrusive_ptr<NexarWork> start(c10d::OpType type, const char* op,
                                      std::vector<at::Tensor> outputs);
  /* Hands a submitted request to the Work, or fails it with the shim's text.  req by
   * reference: take(w, nexar_iX(..., &req), req) reads it after the call. */
  void take(NexarWork& w, nexar_status_t s, nexar_request_t*& req);
  c10::intrusive_ptr<c10d::Work> queue(c10::intrusive_ptr<NexarWork> w);
  /* A pointer to t's elements in a contiguous layout; a copy written back by the Work
   * when t is not contiguous and the op writes it. */
  void* data(NexarWork& w, const at::Tensor& t, bool written);
  /* Sends block j of sends to rank j and receives block i of recvs from rank i. */
  void exchange(NexarWork& w, const std::vector<at::Tensor>& sends,
                const std::vector<at::Tensor>& recvs);
  std::string who(const char* op) const;

  nexar_comm_t* comm_ = nullptr;
  bool owns_comm_ = false;
  std::mutex mu_;
  bool closed_ = false;
  Completer completer_;
};

/* Closes every live group and leaves the job (nexar_finalize); idempotent. */
void shutdown();

/* Every rank of the world, as it enters torch's new_group for a group of some of the
 * ranks (global_ranks, in torch's order): splits the group off the world, for the group's
 * creator that torch calls next on the members only.  Joins the job if this process has
 * not yet. */
void subgroup_split(const std::vector<int64_t>& global_ranks,
                    std::chrono::milliseconds timeout);

} // namespace nexar_torch
