/*
 * work.hpp - a torch Work over nexar requests, and the thread that completes them.
 *
 * torch expects an op to complete without anyone waiting on it: DDP's reducer chains on
 * the Work's future and blocks on that future, not on the Work.  So each process group
 * has a Completer, a thread that waits on its requests in submission order and then
 * finishes the Work and its future.  The shim makes progress inside every nexar_wait on
 * every request, so waiting in order never holds up a later op; and a request belongs
 * to the thread that waits on it (nexar.h), which is always the Completer.
 */
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "nexar.h"

namespace nexar_torch {

class NexarWork : public c10d::Work {
 public:
  NexarWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs);

  /* Takes a request of this op (an op may need several: an uneven all_to_all). */
  void add(nexar_request_t* req) { reqs_.push_back(req); }
  bool started() const { return !reqs_.empty(); }
  /* The op failed to start after some of its requests started: complete() waits for
   * those, then fails with text. */
  void fail_later(std::string text) { late_error_ = std::move(text); }
  /* Runs on the Completer once every request succeeded, in the order added: copies out
   * of temporaries, AVG's division. */
  void then(std::function<void()> fn) { after_.push_back(std::move(fn)); }
  /* Keeps a tensor alive until the op completes (temporaries, inputs). */
  void keep(at::Tensor t) { keep_.push_back(std::move(t)); }

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  /* The Completer's part: waits on every request, then finishes. */
  void complete();
  /* Finishes without waiting (the group is going away, or submission failed). */
  void fail(const std::string& text);

  const std::string& what() const { return what_; }

 private:
  void done(std::exception_ptr err);

  std::string what_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_;
  std::vector<nexar_request_t*> reqs_;
  std::string late_error_;
  std::vector<std::function<void()>> after_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

/* One thread per process group; completes its Works in the order they were queued. */
class Completer {
 public:
  Completer();
  ~Completer();
  void push(c10::intrusive_ptr<NexarWork> w);
  /* Completes what is queued, then stops the thread. */
  void stop();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<NexarWork>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

/* "NEXAR_ERR_PEER_LOST: <the shim's text>" for a failed status on this thread. */
std::string status_text(nexar_status_t s);

} // namespace nexar_torch
