/*
 * work.cpp - NexarWork and the Completer thread (work.hpp says why there is one).
 */
#include "work.hpp"

#include <stdexcept>

namespace nexar_torch {

static const char* status_name(nexar_status_t s)
{
  switch (s) {
    case NEXAR_OK: return "NEXAR_OK";
    case NEXAR_ERR_INVALID: return "NEXAR_ERR_INVALID";
    case NEXAR_ERR_UNAVAILABLE: return "NEXAR_ERR_UNAVAILABLE";
    case NEXAR_ERR_MISMATCH: return "NEXAR_ERR_MISMATCH";
    case NEXAR_ERR_TIMEOUT: return "NEXAR_ERR_TIMEOUT";
    case NEXAR_ERR_PEER_LOST: return "NEXAR_ERR_PEER_LOST";
    case NEXAR_ERR_ABORTED: return "NEXAR_ERR_ABORTED";
    case NEXAR_ERR_NOMEM: return "NEXAR_ERR_NOMEM";
    case NEXAR_ERR_UNSUPPORTED: return "NEXAR_ERR_UNSUPPORTED";
    case NEXAR_ERR_PERMISSION: return "NEXAR_ERR_PERMISSION";
    default: return "NEXAR_ERR_INTERNAL";
  }
}

std::string status_text(nexar_status_t s)
{
  const char* text = nexar_last_error();
  std::string out = status_name(s);
  out += ": ";
  out += (text && *text) ? text : nexar_strerror(s);
  return out;
}

NexarWork::NexarWork(int rank, c10d::OpType type, std::string what,
                     std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      what_(std::move(what)),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get())))
{
}

void NexarWork::complete()
{
  std::string err = late_error_;
  /* Every request is waited on, also after a failure: each is freed only by its wait. */
  for (nexar_request_t* r : reqs_) {
    nexar_status_t s = nexar_wait(r);
    if (s != NEXAR_OK && err.empty())
      err = status_text(s);
  }
  reqs_.clear();
  if (err.empty()) {
    try {
      for (auto& fn : after_)
        fn();
    } catch (const std::exception& e) {
      err = e.what();
    }
  }
  if (!err.empty())
    fail(err);
  else
    done(nullptr);
}

void NexarWork::fail(const std::string& text)
{
  done(std::make_exception_ptr(std::runtime_error("nexar " + what_ + ": " + text)));
}

void NexarWork::done(std::exception_ptr err)
{
  keep_.clear();
  after_.clear();
  /* The Work first: whoever the future wakes (DDP waits on it) finds the Work done too.
   * The future's callbacks run here, on the Completer. */
  finish(err);
  if (err)
    future_->setError(err);
  else
    future_->markCompleted(c10::IValue(outputs_));
}

Completer::Completer() : thread_([this] { run(); }) {}

Completer::~Completer() { stop(); }

void Completer::push(c10::intrusive_ptr<NexarWork> w)
{
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!stopping_) {
      queue_.push_back(std::move(w));
      cv_.notify_one();
      return;
    }
  }
  /* The group closed while this op was being submitted: nobody else will wait for it. */
  w->complete();
}

void Completer::stop()
{
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stopping_ && !thread_.joinable())
      return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable())
    thread_.join();
}

void Completer::run()
{
  for (;;) {
    c10::intrusive_ptr<NexarWork> w;
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty())
        return;
      w = std::move(queue_.front());
      queue_.pop_front();
    }
    w->complete();
  }
}

} // namespace nexar_torch
