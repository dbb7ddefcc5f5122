/*
 * process_group.cpp - ProcessGroupNexar's lifetime and the world it shares: the nexar job
 * is joined by the first group and left by shutdown() or when the last group goes.
 */
#include "process_group.hpp"

#include <cstdlib>
#include <deque>
#include <map>
#include <set>
#include <stdexcept>

#include "convert.hpp"

namespace nexar_torch {

namespace {

/* One nexar_init per process; every group holds a reference.  Groups register so that
 * shutdown() can close them all at interpreter exit, when torch may never drop its own
 * references. */
std::mutex world_mu;
nexar_comm_t* world = nullptr;
int world_refs = 0;
bool world_left = false;
std::set<ProcessGroupNexar*> live;
/* Subgroups split off the world by subgroup_split() for the creator that follows on a
 * member, keyed by the group's world ranks; each holds a world reference. */
std::map<std::vector<int64_t>, std::deque<nexar_comm_t*>> split_off;
/* A rank outside a subgroup keeps the world it took part with until shutdown(). */
bool world_pinned = false;

nexar_comm_t* world_acquire(std::chrono::milliseconds timeout)
{
  std::lock_guard<std::mutex> g(world_mu);
  TORCH_CHECK(!world_left, "nexar: the job was left (nexar.torch.shutdown()); a process "
              "joins a nexar job once");
  if (!world) {
    /* torch's timeout is the deadline of every op unless NEXAR_TIMEOUT says otherwise. */
    if (!std::getenv("NEXAR_TIMEOUT")) {
      long s = (long)((timeout.count() + 999) / 1000);
      setenv("NEXAR_TIMEOUT", std::to_string(s > 0 ? s : 1).c_str(), 0);
    }
    nexar_status_t st = nexar_init(&world);
    TORCH_CHECK(st == NEXAR_OK, "nexar: init_process_group: ", status_text(st));
  }
  world_refs++;
  return world;
}

void world_release_locked()
{
  if (--world_refs == 0 && world) {
    nexar_finalize();
    world = nullptr;
    world_left = true;
  }
}

} // namespace

ProcessGroupNexar::ProcessGroupNexar(int rank, int size, std::chrono::milliseconds timeout,
                                     const std::vector<int64_t>& global_ranks)
    : c10d::ProcessGroup(rank, size)
{
  nexar_comm_t* w = world_acquire(timeout);
  int wsize = nexar_comm_size(w);
  try {
    if (global_ranks.empty()) {
      /* The default group is the world: torch's numbering must be nexar's. */
      TORCH_CHECK(rank == nexar_comm_rank(w) && size == wsize,
                  "nexar: torch's rank ", rank, " of ", size, " is nexar's rank ",
                  nexar_comm_rank(w), " of ", wsize, ": RANK/WORLD_SIZE and the NEXAR_* "
                  "environment disagree");
      comm_ = w;
    } else if ((int)global_ranks.size() == wsize) {
      nexar_status_t st = nexar_comm_split(w, 0, (uint32_t)rank, &comm_);
      TORCH_CHECK(st == NEXAR_OK, "nexar: new_group on rank ", rank, ": ", status_text(st));
      owns_comm_ = true;
    } else {
      /* torch calls a group's creator on its members only, and a split needs every rank
       * of the world: subgroup_split() made the split as every rank entered new_group. */
      std::lock_guard<std::mutex> g(world_mu);
      auto it = split_off.find(global_ranks);
      TORCH_CHECK(it != split_off.end() && !it->second.empty(),
                  "nexar: new_group of ", global_ranks.size(), " of the world's ", wsize,
                  " ranks on rank ", nexar_comm_rank(w), ": the ranks outside the group "
                  "took no part (nexar makes a group with a split that every rank of the "
                  "world joins; nexar.torch arranges it in torch.distributed.new_group, "
                  "which every rank must call)");
      comm_ = it->second.front();
      it->second.pop_front();
      if (it->second.empty())
        split_off.erase(it);
      owns_comm_ = true;
      world_refs--; /* the split's reference: world_acquire above took this group's */
    }
  } catch (...) {
    std::lock_guard<std::mutex> g(world_mu);
    world_release_locked();
    throw;
  }
  std::lock_guard<std::mutex> g(world_mu);
  live.insert(this);
}

ProcessGroupNexar::~ProcessGroupNexar()
{
  /* close() waits for ops in flight, whose futures' callbacks may make groups: not
   * under world_mu. */
  bool mine;
  {
    std::lock_guard<std::mutex> g(world_mu);
    mine = live.erase(this) > 0;
  }
  if (!mine)
    return;
  close();
  std::lock_guard<std::mutex> g(world_mu);
  world_release_locked();
}

void ProcessGroupNexar::close()
{
  {
    std::lock_guard<std::mutex> g(mu_);
    if (closed_)
      return;
    closed_ = true;
  }
  completer_.stop();
  if (owns_comm_)
    nexar_comm_free(comm_);
  comm_ = nullptr;
}

void shutdown()
{
  std::set<ProcessGroupNexar*> groups;
  {
    std::lock_guard<std::mutex> g(world_mu);
    groups.swap(live);
  }
  for (ProcessGroupNexar* pg : groups)
    pg->close();
  std::lock_guard<std::mutex> g(world_mu);
  for (size_t i = 0; i < groups.size(); i++)
    world_release_locked();
  /* Subgroups made for a creator that never came (torch failed in between). */
  for (auto& e : split_off)
    for (nexar_comm_t* c : e.second) {
      nexar_comm_free(c);
      world_release_locked();
    }
  split_off.clear();
  if (world_pinned) {
    world_pinned = false;
    world_release_locked();
  }
}

void subgroup_split(const std::vector<int64_t>& global_ranks,
                    std::chrono::milliseconds timeout)
{
  nexar_comm_t* w = world_acquire(timeout);
  int me = nexar_comm_rank(w), wsize = nexar_comm_size(w);
  int key = -1;
  std::string bad;
  std::set<int64_t> seen;
  for (size_t i = 0; i < global_ranks.size(); i++) {
    int64_t r = global_ranks[i];
    if (r < 0 || r >= wsize || !seen.insert(r).second)
      bad = "rank " + std::to_string(r) + " is out of range or listed twice";
    if (r == me)
      key = (int)i;
  }
  nexar_comm_t* out = nullptr;
  nexar_status_t st = NEXAR_OK;
  if (bad.empty())
    st = nexar_comm_split(w, key >= 0 ? 0 : NEXAR_UNDEFINED, (uint32_t)(key >= 0 ? key : 0),
                          &out);
  std::lock_guard<std::mutex> g(world_mu);
  if (!bad.empty() || st != NEXAR_OK) {
    world_release_locked();
    TORCH_CHECK(bad.empty(), "nexar: new_group on rank ", me, " of ", wsize, ": ", bad);
    TORCH_CHECK(false, "nexar: new_group on rank ", me, ": ", status_text(st));
  }
  if (out) {
    split_off[global_ranks].push_back(out); /* it keeps the reference taken above */
  } else if (world_pinned) {
    world_release_locked();
  } else {
    world_pinned = true;
  }
}

std::string ProcessGroupNexar::who(const char* op) const
{
  return std::string(op) + " (rank " + std::to_string(getRank()) + " of " +
         std::to_string(getSize()) + ")";
}

c10::intrusive_ptr<NexarWork> ProcessGroupNexar::start(c10d::OpType type, const char* op,
                                                       std::vector<at::Tensor> outputs)
{
  std::lock_guard<std::mutex> g(mu_);
  TORCH_CHECK(!closed_, "nexar ", who(op), ": the process group was shut down");
  return c10::make_intrusive<NexarWork>(getRank(), type, who(op), std::move(outputs));
}

void ProcessGroupNexar::take(NexarWork& w, nexar_status_t s, nexar_request_t*& req)
{
  if (s == NEXAR_OK) {
    w.add(req);
    return;
  }
  std::string text = status_text(s);
  /* Requests this op already started are still the library's: the Completer waits
   * for them, and the Work fails with this error. */
  if (w.started()) {
    w.fail_later(text);
    completer_.push(c10::intrusive_ptr<NexarWork>::reclaim_copy(&w));
  }
  throw std::runtime_error("nexar " + w.what() + ": " + text);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNexar::queue(c10::intrusive_ptr<NexarWork> w)
{
  completer_.push(w);
  return w;
}

void* ProcessGroupNexar::data(NexarWork& w, const at::Tensor& t, bool written)
{
  check_host(t, w.what());
  if (t.is_contiguous()) {
    w.keep(t);
    return t.data_ptr();
  }
  at::Tensor c = t.contiguous();
  w.keep(c);
  if (written) {
    at::Tensor dst = t;
    w.then([dst, c]() mutable { dst.copy_(c); });
  }
  return c.data_ptr();
}

/* ---- conversions ------------------------------------------------------------------- */

nexar_dtype_t dtype_of(const at::Tensor& t, const std::string& what)
{
  switch (t.scalar_type()) {
    case at::kFloat: return NEXAR_F32;
    case at::kDouble: return NEXAR_F64;
    case at::kHalf: return NEXAR_F16;
    case at::kBFloat16: return NEXAR_BF16;
    case at::kChar: return NEXAR_I8;
    case at::kByte: return NEXAR_U8;
    case at::kBool: return NEXAR_U8;
    case at::kInt: return NEXAR_I32;
    case at::kLong: return NEXAR_I64;
    default:
      TORCH_CHECK(false, "nexar ", what, ": tensors of ", t.scalar_type(),
                  " are not supported (float, double, half, bfloat16, int8, uint8, bool, "
                  "int32, int64 are)");
  }
}

nexar_op_t op_of(const c10d::ReduceOp& op, const at::Tensor& t, const std::string& what,
                 bool* avg)
{
  bool is_bool = t.scalar_type() == at::kBool;
  *avg = false;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return is_bool ? NEXAR_MAX : NEXAR_SUM;
    case c10d::ReduceOp::PRODUCT: return is_bool ? NEXAR_MIN : NEXAR_PROD;
    case c10d::ReduceOp::MIN: return NEXAR_MIN;
    case c10d::ReduceOp::MAX: return NEXAR_MAX;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(at::isFloatingType(t.scalar_type()), "nexar ", what,
                  ": AVG needs a floating-point tensor, not ", t.scalar_type());
      *avg = true;
      return NEXAR_SUM;
    default:
      TORCH_CHECK(false, "nexar ", what, ": reduce op ", (int)op.op_,
                  " is not supported (SUM, PRODUCT, MIN, MAX and AVG are)");
  }
}

void check_host(const at::Tensor& t, const std::string& what)
{
  TORCH_CHECK(t.device().is_cpu(), "nexar ", what, ": a tensor on ", t.device(),
              ": the torch backend takes host tensors only (device tensors across nodes "
              "are not wired to torch yet)");
  TORCH_CHECK(t.layout() == at::kStrided, "nexar ", what, ": sparse tensors are not "
              "supported");
}

} // namespace nexar_torch
