// A fixed set of threads that run one task together, each on its own share of a batch.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace strata {

// Worker i's share [begin, end) of n items split over `workers`: as even as integers allow.
inline std::pair<std::int64_t, std::int64_t> worker_share(std::int64_t n, int workers, int i) {
  return {n * i / workers, n * (i + 1) / workers};
}

// Round `n` of a spin wait between tasks of one run(): a pause, and now and then a yield, which
// leaves the core to the task waited for where the workers outnumber the cores.
void spin_wait_round(unsigned n);

class WorkerPool {
 public:
  // `workers` threads in all, counting the caller: run() uses the calling thread as worker 0.
  explicit WorkerPool(int workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return workers_; }
  // Runs task(i) for i in [0, size()) concurrently and returns when all are done.
  // The first exception any worker threw is rethrown here.
  void run(const std::function<void(int)>& task);

 private:
  void loop(int index);
  // Spins a little while until `ready` holds, then waits on `signal` under the mutex: a step's
  // next task follows the last within microseconds, sooner than a sleeping thread wakes.
  void await(std::condition_variable& signal, const std::function<bool()>& ready);

  int workers_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* task_ = nullptr;
  // Written under mutex_; read without it while spinning.
  std::atomic<std::uint64_t> generation_ = 0;
  std::atomic<int> pending_ = 0;
  std::atomic<bool> stopping_ = false;
  std::exception_ptr error_;
};

}  // namespace strata
