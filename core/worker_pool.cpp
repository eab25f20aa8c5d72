#include "core/worker_pool.hpp"

#include <chrono>

#include "core/cpu_kernels.hpp"

namespace strata {

namespace {

// Tells the core that this thread spins, so that it yields to a sibling hyperthread.
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

void spin_wait_round(unsigned n) {
  if (n % 256 == 255)
    std::this_thread::yield();
  else
    spin_pause();
}

void WorkerPool::await(std::condition_variable& signal, const std::function<bool()>& ready) {
  // About as long as a sleeping thread takes to wake on these machines; past it, sleep.
  constexpr auto spin = std::chrono::microseconds(50);
  const auto until = std::chrono::steady_clock::now() + spin;
  for (unsigned n = 1; !ready(); ++n) {
    spin_pause();
    // The clock is read now and then: the wait is short, and its end need not be exact.
    if (n % 64 == 0 && std::chrono::steady_clock::now() >= until) break;
  }
  std::unique_lock lock(mutex_);
  signal.wait(lock, ready);
}

WorkerPool::WorkerPool(int workers) : workers_(workers < 1 ? 1 : workers) {
  configure_kernel_thread();
  for (int i = 1; i < workers_; ++i) threads_.emplace_back([this, i] { loop(i); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::run(const std::function<void(int)>& task) {
  {
    std::lock_guard lock(mutex_);
    task_ = &task;
    pending_ = workers_ - 1;
    error_ = nullptr;
    ++generation_;
  }
  start_.notify_all();
  std::exception_ptr mine;
  try {
    task(0);
  } catch (...) {
    mine = std::current_exception();
  }
  await(done_, [this] { return pending_ == 0; });
  std::lock_guard lock(mutex_);
  task_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

void WorkerPool::loop(int index) {
  configure_kernel_thread();  // OpenMP's thread count is per thread
  std::uint64_t seen = 0;
  while (true) {
    const std::function<void(int)>* task = nullptr;
    await(start_, [&] { return stopping_ || generation_ != seen; });
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      seen = generation_;
      task = task_;
    }
    std::exception_ptr failure;
    try {
      (*task)(index);
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      if (failure && !error_) error_ = failure;
      --pending_;
    }
    done_.notify_one();
  }
}

}  // namespace strata
