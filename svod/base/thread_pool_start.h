// Starting the thread pool (thread_pool.h) ahead of its first use, so that a
// process's first parallel launch is not the one that waits for oneTBB to
// start (issue 36). Apart from thread_pool.h, which much of svod includes.
#pragma once

namespace svod {

// Makes the pool and sets up its arena on a background thread, and returns
// at once; the later calls do nothing. Starts no worker. Called when the CPU
// device is made. A fork waits for the thread, and so does exit; see
// thread_pool.cpp. `prepare_worker`, when not null, is what each worker
// started ahead (join_thread_pool) runs first, so that the first parallel
// launch does not (the CPU device's per-thread set-up for kernels).
void start_thread_pool(void (*prepare_worker)() noexcept = nullptr) noexcept;

// After start_thread_pool(): has the pool's workers started on a background
// thread (once the pool is made, the first call only), which the first
// parallel launch would otherwise do (0.2-0.7 ms); and once the pool is
// made, registers the calling thread with oneTBB's scheduler, which its
// first use of the pool would otherwise do (0.1-0.2 ms, more in a process
// with many mappings). Never waits. Nothing at a thread's later calls.
// Called when a CPU program is made, as launches likely follow from the same
// thread.
void join_thread_pool() noexcept;

// Waits until start_thread_pool()'s thread, if one was started, has ended.
void finish_thread_pool_start() noexcept;

}  // namespace svod
