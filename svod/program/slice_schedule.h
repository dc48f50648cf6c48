// Whether a CPU launch of several core_id slices spreads them over the pool
// or runs them one after another on the calling thread. Spreading is what a
// quiet machine wants. On one whose cores other processes want too, a pool
// thread preempted inside its slice holds the whole launch for a scheduler
// time slice (milliseconds) while the caller waits, and the caller alone is
// faster (a 2-slice kernel of 52 µs alone: 32 µs spread on a quiet machine,
// 55-420 µs spread beside one CPU-bound process, 52 µs alone beside it).
//
// Each program keeps a running mean of its launches' times the way it runs
// them now, and the last probe's time of the other way, and runs the faster
// (alone must win by a tenth: near a tie the pool is kept). A probe is two
// launches the other way, every kProbe launches (the first after
// kFirstProbe); only the second counts, since after launches alone the
// pool's workers have gone to sleep and the first spread launch pays their
// waking. Probes are rare for the same reason: with a probe every 32nd
// launch, the wakings cost the quiet 2-slice chain above 5 µs a launch. A sample counts at most twice the mean, so one stall on a
// quiet machine does not turn a program away from the pool.
#pragma once

#include <atomic>
#include <cstdint>

namespace svod {

class SliceSchedule {
 public:
  static constexpr uint32_t kFirstProbe = 64;
  static constexpr uint32_t kProbe = 1024;

  struct Choice {
    bool spread;
    uint8_t probe;  // 0: not a probe; 1, 2: the probe's first and second launch
  };

  Choice next() noexcept {
    const uint32_t n = launches_.fetch_add(1, std::memory_order_relaxed) + 1;
    const int64_t spread = spread_ns_.load(std::memory_order_relaxed);
    const int64_t alone = alone_ns_.load(std::memory_order_relaxed);
    // Until both are known: spread (the first probe measures alone).
    const bool spread_wins = spread == 0 || alone == 0 || spread * 10 <= alone * 11;
    const uint32_t into_probe = n < kProbe ? n - kFirstProbe : n % kProbe;  // 0, 1: the probe's launches
    if (n >= kFirstProbe && into_probe < 2) return {!spread_wins, static_cast<uint8_t>(into_probe + 1)};
    return {spread_wins, 0};
  }

  // The launch `choice` was for took `ns`.
  void record(Choice choice, int64_t ns) noexcept {
    if (choice.probe == 1) return;
    std::atomic<int64_t>& mean = choice.spread ? spread_ns_ : alone_ns_;
    if (ns <= 0) ns = 1;
    if (choice.probe == 2) {
      mean.store(ns, std::memory_order_relaxed);
      return;
    }
    const int64_t old = mean.load(std::memory_order_relaxed);
    const int64_t sample = old == 0 || ns < 2 * old ? ns : 2 * old;
    mean.store(old == 0 ? sample : old + (sample - old) / 8, std::memory_order_relaxed);
  }

  int64_t spread_ns() const noexcept { return spread_ns_.load(std::memory_order_relaxed); }
  int64_t alone_ns() const noexcept { return alone_ns_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint32_t> launches_{0};
  std::atomic<int64_t> spread_ns_{0};  // 0: none yet
  std::atomic<int64_t> alone_ns_{0};
};

}  // namespace svod
