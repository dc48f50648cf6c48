// Starting the thread pool (thread_pool.h) ahead of its first use, so that a
// process's first parallel launch is not the one that waits for oneTBB to
// start (issue 36). Apart from thread_pool.h, which much of svod includes.
#pragma once

namespace svod {

// Makes the pool and sets up its arena on a background thread, and returns
// at once; the later calls do nothing. Starts no worker (oneTBB does at the
// first parallel launch). Called when the CPU device is made. A fork waits
// for the thread, and so does exit; see thread_pool.cpp.
void start_thread_pool() noexcept;

// Once start_thread_pool() has set the pool up: registers the calling thread
// with oneTBB's scheduler, which its first use of the pool would otherwise
// do (0.1-0.2 ms, more in a process with many mappings), without waiting for
// anything. Nothing before that, and nothing at a thread's later calls.
// Called when a CPU program is made, as its launches likely come from the
// same thread.
void join_thread_pool() noexcept;

// Waits until start_thread_pool()'s thread, if one was started, has ended.
void finish_thread_pool_start() noexcept;

}  // namespace svod
