// Executor: how the library runs independent tasks in parallel. Engines own their thread pools:
// they hand the library an executor that runs a batch of tasks on their threads; by default the
// library uses OpenMP. Results never depend on which executor or how many threads run the tasks.
//
//   struct MyPool final : kvsketch::Executor {
//     void run(size_t count, kvsketch::TaskFunction task, void* context) override {
//       pool.parallel_for(count, [&](size_t i) { task(context, i); });  // returns when all are done
//     }
//   };
#pragma once
#include <cstddef>

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

// One task of a batch: task(context, i) for i in [0, count). A plain function pointer and a context,
// so that a batch costs no allocation and crosses a C boundary as it is.
using TaskFunction = void (*)(void* context, size_t index);

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs task(context, i) once for every i in [0, count), in any order and on any threads, and
  // returns when all have finished. Tasks of one batch are independent; they do not throw.
  virtual void run(size_t count, TaskFunction task, void* context) = 0;
};

// OpenMP threads: `threads` of them (0: all of OpenMP's), never more than the tasks of a batch.
class OpenMPExecutor final : public Executor {
 public:
  explicit OpenMPExecutor(int threads = 0);
  void run(size_t count, TaskFunction task, void* context) override;

 private:
  int threads_;
};

// A C-style callback: parallel_for(user, count, task, context) must run task(context, i) for every
// i < count and return when all are done (the C ABI's executor).
class CallbackExecutor final : public Executor {
 public:
  using ParallelFor = void (*)(void* user, size_t count, TaskFunction task, void* context);
  CallbackExecutor(ParallelFor parallel_for, void* user);
  void run(size_t count, TaskFunction task, void* context) override;

 private:
  ParallelFor parallel_for_;
  void* user_;
};

}  // namespace kvsketch
#pragma GCC visibility pop
