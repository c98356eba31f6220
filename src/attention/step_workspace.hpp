// The memory of one decode call (its steps, their item list, scratch), kept between calls: a cache
// holds a pool of them, so that a warm call allocates nothing, and calls running at once (decode is
// const and may run beside other decodes, or nested inside an engine's executor) each take their own.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "attention/group_step.hpp"

namespace kvsketch {

struct StepWorkspace {
  std::vector<GroupStep> steps;  // a call uses the first `count`; the rest keep their memory
  std::vector<std::pair<size_t, size_t>> items;
  std::vector<CodeSegment> segments;
  std::vector<float> scratch_lse;
  // At least `count` steps, keeping those there.
  GroupStep* reserve_steps(size_t count) {
    if (steps.size() < count) steps.resize(count);
    return steps.data();
  }
};

class WorkspacePool {
 public:
  // A workspace of the pool (or a new one), back in the pool when the lease ends.
  class Lease {
   public:
    Lease(WorkspacePool& pool, std::unique_ptr<StepWorkspace> workspace)
        : pool_(pool), workspace_(std::move(workspace)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool_.give_back(std::move(workspace_)); }
    StepWorkspace& operator*() const { return *workspace_; }
    StepWorkspace* operator->() const { return workspace_.get(); }

   private:
    WorkspacePool& pool_;
    std::unique_ptr<StepWorkspace> workspace_;
  };

  WorkspacePool() = default;
  // A copy of a cache starts with an empty pool.
  WorkspacePool(const WorkspacePool&) {}
  WorkspacePool& operator=(const WorkspacePool&) { return *this; }

  Lease take() {
    std::unique_ptr<StepWorkspace> workspace;
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        workspace = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (!workspace) workspace = std::make_unique<StepWorkspace>();
    return Lease(*this, std::move(workspace));
  }

 private:
  void give_back(std::unique_ptr<StepWorkspace> workspace) noexcept {
    std::lock_guard lock(mutex_);
    try {
      free_.push_back(std::move(workspace));
    } catch (...) {  // no room to keep it: it is freed
    }
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<StepWorkspace>> free_;
};

}  // namespace kvsketch
