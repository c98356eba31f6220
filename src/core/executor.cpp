#include "kvsketch/executor.hpp"

#include "core/team_size.hpp"

namespace kvsketch {

OpenMPExecutor::OpenMPExecutor(int threads) : threads_(threads) { check_threads(threads, "OpenMPExecutor"); }

void OpenMPExecutor::run(size_t count, TaskFunction task, void* context) {
  const long n = static_cast<long>(count);
  // Dealt one at a time: tasks differ in length (a window half against a block of codes).
#pragma omp parallel for schedule(dynamic, 1) num_threads(team_size(threads_, count)) if (n > 1)
  for (long i = 0; i < n; ++i) task(context, static_cast<size_t>(i));
}

CallbackExecutor::CallbackExecutor(ParallelFor parallel_for, void* user) : parallel_for_(parallel_for), user_(user) {
  require(parallel_for != nullptr, "CallbackExecutor: null parallel_for callback");
}

void CallbackExecutor::run(size_t count, TaskFunction task, void* context) {
  if (count == 0) return;
  parallel_for_(user_, count, task, context);
}

}  // namespace kvsketch
