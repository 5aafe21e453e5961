// tests/tiers/downgrade_workload.h: a GPU+HOST workload that downgrades, run
// on the simulation by tier_workload_test and on a real GPU by
// tiers_gpu_test (the same code: every CUDA call goes through gmr's layer).
//
// A producer writes buffers into a GPU space, each under a reservation bound
// to a stream borrowed from the space's pool; the buffer stays resident
// (untracked) after its reservation is released. A mover watches the GPU
// space's downgrade state: above the trigger it copies the oldest resident
// buffers into pinned HOST blocks (a reservation chosen by the downgrade
// strategy) until use is back at the stop level; at or below the stop level
// it moves buffers back up while the GPU has room. The producer's
// reservations block while the GPU is full and wake when the mover frees.
// At the end the GPU-resident buffers are checked and freed, then every
// HOST buffer is moved back up (there is room now), checked and freed.
#ifndef GMR_TESTS_TIERS_DOWNGRADE_WORKLOAD_H_
#define GMR_TESTS_TIERS_DOWNGRADE_WORKLOAD_H_

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda_layer.h"
#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "gmr/tiers/numa_host_resource.h"
#include "gmr/tiers/stream_pool.h"
#include "gmr/tiers/tier_manager.h"

namespace gmr_test {

struct WorkloadConfig {
  size_t buffer_bytes = size_t{64} << 20;
  int buffers = 48;
  size_t gpu_bytes = size_t{1} << 30;
  size_t host_bytes = size_t{4} << 30;
  size_t host_block_bytes = size_t{1} << 20;
  size_t host_blocks_per_chunk = 64;
  int host_numa_node = 0;
  size_t host_initial_chunks = 0;  // HOST chunks pinned at create (0: all pinned on demand)
  double trigger = 0.75;
  double stop = 0.5;
};

struct WorkloadResult {
  double elapsed_ms = 0;
  // Where the time went: building the manager (pinning host_initial_chunks),
  // producing (until the producer's last buffer), and consuming (reading
  // every buffer back and checking it, the final moves up included).
  double build_ms = 0, produce_ms = 0, consume_ms = 0;
  uint64_t gpu_alloc_ns = 0;   // GPU allocations (producer and moves up)
  uint64_t fill_ns = 0;        // the producer's memset + synchronise
  uint64_t host_alloc_ns = 0;  // HOST blocks for moves down (fresh chunks pinned here)
  uint64_t verify_ns = 0;      // reading buffers back and checking them
  uint64_t bytes_down = 0, bytes_up = 0, copy_ns = 0;
  uint64_t moves_down = 0, moves_up = 0;
  size_t bad_bytes = 0;  // bytes that read back wrong
  gmr_tier_manager_stats manager = GMR_TIER_MANAGER_STATS_INIT;
  gmr_memory_space_stats gpu = GMR_MEMORY_SPACE_STATS_INIT;
  gmr_memory_space_stats host = GMR_MEMORY_SPACE_STATS_INIT;
  gmr_numa_host_resource_stats numa = GMR_NUMA_HOST_RESOURCE_STATS_INIT;
  bool over_promised = false;  // the GPU space's used ever above its reservation limit
};

class DowngradeWorkload {
 public:
  explicit DowngradeWorkload(const WorkloadConfig &c) : c_(c) {}

  // Runs the workload; false with `error` set on any failure.
  bool Run(WorkloadResult *out, std::string *error) {
    auto t_build = Clock::now();
    if (!Build(error)) return false;
    out->build_ms = MsSince(t_build);
    auto t0 = Clock::now();
    std::thread mover([this] { Mover(); });
    std::thread producer([this] { Producer(); });
    producer.join();
    out->produce_ms = MsSince(t0);
    mover.join();
    auto t_consume = Clock::now();
    Consume();
    out->consume_ms = MsSince(t_consume);
    out->elapsed_ms = MsSince(t0);
    out->gpu_alloc_ns = gpu_alloc_ns_;
    out->fill_ns = fill_ns_;
    out->host_alloc_ns = host_alloc_ns_;
    out->verify_ns = verify_ns_;
    out->bytes_down = bytes_down_;
    out->bytes_up = bytes_up_;
    out->moves_down = moves_down_;
    out->moves_up = moves_up_;
    out->copy_ns = copy_ns_;
    out->bad_bytes = bad_bytes_;
    out->over_promised = over_promised_;
    Check(gmr_tier_manager_get_stats(m_, &out->manager), "manager stats");
    Check(gmr_memory_space_get_stats(g_, &out->gpu), "gpu stats");
    Check(gmr_memory_space_get_stats(h_, &out->host), "host stats");
    gmr_resource *leaf = gmr_resource_get_upstream(gmr_resource_get_upstream(
        gmr_resource_get_upstream(gmr_memory_space_as_resource(h_))));
    Check(gmr_numa_host_resource_get_stats(gmr_numa_host_resource_from_resource(leaf), &out->numa),
          "numa stats");
    gmr_status st = gmr_tier_manager_destroy(m_);
    m_ = nullptr;
    Check(st, "destroy");
    if (errors_ != 0) *error = first_error_;
    return errors_ == 0;
  }

  ~DowngradeWorkload() {
    if (m_ != nullptr) (void)gmr_tier_manager_destroy(m_);
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr uint64_t kSecond = 1000000000ull;
  // On the GPU one allocation; on HOST a list of blocks of the HOST space's
  // block size (cuCascade keeps host data in fixed-size blocks).
  struct Buffer {
    void *ptr = nullptr;
    std::vector<void *> blocks;
    bool on_host = false;
    unsigned char value = 0;
  };
  size_t BlockSize(size_t k) const {
    size_t left = c_.buffer_bytes - k * c_.host_block_bytes;
    return left < c_.host_block_bytes ? left : c_.host_block_bytes;
  }
  size_t BlockCount() const {
    return (c_.buffer_bytes + c_.host_block_bytes - 1) / c_.host_block_bytes;
  }
  static double MsSince(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
  static uint64_t NsSince(Clock::time_point t0) {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  }

  bool Check(gmr_status st, const char *what, const gmr_failure *f = nullptr) {
    if (st == GMR_OK) return true;
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (errors_++ == 0) {
      first_error_ = std::string(what) + ": " + gmr_status_name(st);
      if (f != nullptr) first_error_ += std::string(" (") + f->message + ")";
    }
    return false;
  }

  bool Build(std::string *error) {
    gmr_memory_space_config gpu = gmr_memory_space_config_default(GMR_TIER_GPU, 0);
    gpu.capacity_bytes = c_.gpu_bytes;
    gpu.reservation_limit_fraction = 1.0;
    gpu.downgrade_trigger_fraction = c_.trigger;
    gpu.downgrade_stop_fraction = c_.stop;
    gpu.stream_count = 4;
    gmr_memory_space_config host = gmr_memory_space_config_default(GMR_TIER_HOST, 0);
    host.capacity_bytes = c_.host_bytes;
    host.reservation_limit_fraction = 1.0;
    host.numa_node = c_.host_numa_node;
    host.block_bytes = c_.host_block_bytes;
    host.blocks_per_chunk = c_.host_blocks_per_chunk;
    host.initial_chunk_count = c_.host_initial_chunks;
    host.stream_count = 2;
    gmr_memory_space_config configs[] = {gpu, host};
    gmr_failure f = GMR_FAILURE_INIT;
    if (gmr_tier_manager_create(configs, 2, &m_, &f) != GMR_OK) {
      *error = f.message;
      return false;
    }
    gpu_id_ = {GMR_TIER_GPU, 0};
    g_ = gmr_tier_manager_get_space(m_, gpu_id_);
    h_ = gmr_tier_manager_get_space(m_, {GMR_TIER_HOST, 0});
    on_gpu_ = gmr_reservation_strategy_space(gpu_id_);
    down_ = gmr_reservation_strategy_downgrade(gpu_id_, GMR_TIER_HOST);
    buffers_.resize(static_cast<size_t>(c_.buffers));
    return true;
  }

  void WatchPromise() {
    gmr_memory_space_stats s = GMR_MEMORY_SPACE_STATS_INIT;
    if (gmr_memory_space_get_stats(g_, &s) == GMR_OK &&
        s.used_bytes > s.reservation_limit_bytes) {
      over_promised_ = true;
    }
  }

  // Move buffer i to the other tier on a borrowed stream. `wait`: block for
  // room in the target (downgrades, and the final upgrades); else try once.
  bool Move(int i, bool to_host, bool wait) {
    gmr_memory_space *from_space = to_host ? g_ : h_;
    gmr_stream_pool *pool = gmr_memory_space_get_stream_pool(to_host ? h_ : g_);
    gmr_stream s = nullptr;
    if (!Check(gmr_stream_pool_acquire(pool, GMR_STREAM_ACQUIRE_BLOCK, 30 * kSecond, &s), "acquire")) {
      return false;
    }
    const gmr_reservation_strategy *where = to_host ? &down_ : &on_gpu_;
    gmr_reservation_id r = 0;
    gmr_failure f = GMR_FAILURE_INIT;
    gmr_status st = wait ? gmr_tier_manager_reserve(m_, where, c_.buffer_bytes, 30 * kSecond, &r, &f)
                         : gmr_tier_manager_try_reserve(m_, where, c_.buffer_bytes, &r, &f);
    if (st != GMR_OK) {
      if (wait) Check(st, "reserve for a move", &f);
      (void)gmr_stream_pool_release(pool, s);
      return false;
    }
    gmr_reservation_info info = GMR_RESERVATION_INFO_INIT;
    Check(gmr_reservation_get_info(m_, r, &info), "info");
    gmr_resource *target = gmr_memory_space_as_resource(gmr_tier_manager_get_space(m_, info.space));
    gmr_resource *source = gmr_memory_space_as_resource(from_space);
    Buffer &b = buffers_[static_cast<size_t>(i)];
    bool ok = Check(gmr_reservation_bind_stream(m_, r, s, nullptr, &f), "bind", &f);
    void *dst = nullptr;
    std::vector<void *> dst_blocks;
    auto t_alloc = Clock::now();
    if (ok && to_host) {
      for (size_t k = 0; k < BlockCount() && ok; ++k) {
        void *blk = nullptr;
        ok =
            Check(gmr_resource_allocate(target, BlockSize(k), 0, s, &blk), "allocate a host block");
        if (ok) dst_blocks.push_back(blk);
      }
      host_alloc_ns_ += NsSince(t_alloc);
    } else if (ok) {
      ok = Check(gmr_resource_allocate(target, c_.buffer_bytes, 0, s, &dst), "allocate on the GPU");
      gpu_alloc_ns_ += NsSince(t_alloc);
    }
    if (ok) {
      auto t0 = Clock::now();
      for (size_t k = 0; k < BlockCount() && ok; ++k) {
        char *gpu = static_cast<char *>(to_host ? b.ptr : dst) + k * c_.host_block_bytes;
        void *host = to_host ? dst_blocks[k] : b.blocks[k];
        ok = Check(to_host ? gmr_cuda_stream_memcpy_async(host, gpu, BlockSize(k), s)
                           : gmr_cuda_stream_memcpy_async(gpu, host, BlockSize(k), s),
                   "copy");
      }
      ok = ok && Check(gmr_cuda_stream_synchronize(s), "synchronise the copy");
      copy_ns_ += static_cast<uint64_t>(MsSince(t0) * 1e6);
      if (ok && to_host) {
        ok = Check(gmr_resource_deallocate(source, b.ptr, c_.buffer_bytes, 0, s),
                   "free the GPU buffer");
      } else if (ok) {
        for (size_t k = 0; k < b.blocks.size() && ok; ++k) {
          ok = Check(gmr_resource_deallocate(source, b.blocks[k], BlockSize(k), 0, s),
                     "free a host block");
        }
      }
      if (ok) {
        b.ptr = to_host ? nullptr : dst;
        b.blocks = to_host ? dst_blocks : std::vector<void *>();
        b.on_host = to_host;
        (to_host ? bytes_down_ : bytes_up_) += c_.buffer_bytes;
        (to_host ? moves_down_ : moves_up_)++;
      }
    }
    Check(gmr_reservation_release(m_, r, &f), "release after a move", &f);
    Check(gmr_stream_pool_release(pool, s), "return a stream");
    WatchPromise();
    return ok;
  }

  void Mover() {
    while (producing_.load() && errors_.load() == 0) {
      bool downgrading = false;
      size_t amount = 0;
      Check(gmr_memory_space_poll_downgrade(g_, &downgrading, &amount), "poll");
      int victim = -1, back = -1;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (downgrading && !resident_.empty()) {
          victim = resident_.front();
          resident_.pop_front();
        } else if (!downgrading && !moved_.empty() && gmr_memory_space_should_stop_downgrading(g_)) {
          back = moved_.back();
          moved_.pop_back();
        }
      }
      if (victim >= 0) {
        bool ok = Move(victim, true, true);
        std::lock_guard<std::mutex> lock(mu_);
        if (ok) {
          moved_.push_back(victim);
        } else {
          resident_.push_front(victim);
        }
      } else if (back >= 0) {
        bool ok = Move(back, false, false);
        std::lock_guard<std::mutex> lock(mu_);
        if (ok) {
          resident_.push_back(back);
        } else {
          moved_.push_back(back);
        }
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }

  void Producer() {
    const gmr__cuda_ops *cuda = gmr__cuda();
    gmr_stream_pool *pool = gmr_memory_space_get_stream_pool(g_);
    gmr_resource *gr = gmr_memory_space_as_resource(g_);
    for (int i = 0; i < c_.buffers && errors_.load() == 0; ++i) {
      gmr_stream s = nullptr;
      if (!Check(gmr_stream_pool_acquire(pool, GMR_STREAM_ACQUIRE_BLOCK, 30 * kSecond, &s),
                 "producer acquire")) {
        break;
      }
      gmr_reservation_id r = 0;
      gmr_failure f = GMR_FAILURE_INIT;
      if (!Check(gmr_tier_manager_reserve(m_, &on_gpu_, c_.buffer_bytes, 30 * kSecond, &r, &f),
                 "producer reserve", &f)) {
        (void)gmr_stream_pool_release(pool, s);
        break;
      }
      void *p = nullptr;
      unsigned char value = static_cast<unsigned char>(17 + i);
      bool ok = Check(gmr_reservation_bind_stream(m_, r, s, nullptr, &f), "producer bind", &f);
      auto t_alloc = Clock::now();
      ok = ok && Check(gmr_resource_allocate(gr, c_.buffer_bytes, 0, s, &p), "producer allocate");
      gpu_alloc_ns_ += NsSince(t_alloc);
      auto t_fill = Clock::now();
      ok = ok &&
           Check(gmr__status_from_cuda(cuda->memset_async(p, value, c_.buffer_bytes, s)),
                 "memset") &&
           Check(gmr_cuda_stream_synchronize(s), "producer synchronise");
      fill_ns_ += NsSince(t_fill);
      Check(gmr_reservation_release(m_, r, &f), "producer release", &f);  // the buffer stays
      Check(gmr_stream_pool_release(pool, s), "producer return");
      WatchPromise();
      if (!ok) break;
      std::lock_guard<std::mutex> lock(mu_);
      Buffer &b = buffers_[static_cast<size_t>(i)];
      b.ptr = p;
      b.on_host = false;
      b.value = value;
      resident_.push_back(i);
    }
    producing_ = false;
  }

  // Read a GPU buffer back (into one host buffer reused for every check,
  // so its pages fault in once) and count the bytes that are wrong.
  void Verify(const Buffer &b) {
    auto t0 = Clock::now();
    readback_.resize(c_.buffer_bytes);
    if (Check(gmr_cuda_stream_memcpy_async(readback_.data(), b.ptr, c_.buffer_bytes, nullptr),
              "read back") &&
        Check(gmr_cuda_stream_synchronize(nullptr), "read back synchronise")) {
      size_t bad = 0;
      for (unsigned char v : readback_) bad += v != b.value;
      bad_bytes_ += bad;
    }
    verify_ns_ += NsSince(t0);
  }

  void Consume() {
    gmr_resource *gr = gmr_memory_space_as_resource(g_);
    std::deque<int> on_host;
    for (int i = 0; i < c_.buffers; ++i) {
      Buffer &b = buffers_[static_cast<size_t>(i)];
      if (b.on_host) {
        on_host.push_back(i);
        continue;
      }
      if (b.ptr == nullptr) continue; /* never produced (the producer failed) */
      Verify(b);
      Check(gmr_resource_deallocate(gr, b.ptr, c_.buffer_bytes, 0, nullptr), "consume");
      b.ptr = nullptr;
    }
    // The GPU is free again: every HOST buffer comes back up, then goes.
    for (int i : on_host) {
      if (!Move(i, false, true)) break;
      Buffer &b = buffers_[static_cast<size_t>(i)];
      Verify(b);
      Check(gmr_resource_deallocate(gr, b.ptr, c_.buffer_bytes, 0, nullptr), "consume moved");
      b.ptr = nullptr;
    }
  }

  WorkloadConfig c_;
  gmr_tier_manager *m_ = nullptr;
  gmr_memory_space *g_ = nullptr, *h_ = nullptr;
  gmr_memory_space_id gpu_id_{};
  gmr_reservation_strategy on_gpu_{}, down_{};
  std::vector<Buffer> buffers_;
  std::mutex mu_;
  std::deque<int> resident_;  // GPU buffers, oldest first
  std::deque<int> moved_;     // HOST buffers, most recent last
  std::atomic<bool> producing_{true};
  std::atomic<uint64_t> bytes_down_{0}, bytes_up_{0}, copy_ns_{0}, moves_down_{0}, moves_up_{0};
  std::atomic<uint64_t> gpu_alloc_ns_{0}, fill_ns_{0}, host_alloc_ns_{0}, verify_ns_{0};
  std::vector<unsigned char> readback_;  // Consume's thread only
  std::atomic<bool> over_promised_{false};
  size_t bad_bytes_ = 0;
  std::atomic<int> errors_{0};
  std::mutex error_mutex_;
  std::string first_error_;
};

inline void PrintWorkload(const char *tag, const WorkloadConfig &c, const WorkloadResult &r) {
  const gmr_tier_manager_stats &ms = r.manager;
  double moved_gb = static_cast<double>(r.bytes_down + r.bytes_up) / 1e9;
  uint64_t waited = ms.reserve_count - ms.immediate_reserve_count;
  std::printf(
      "%s downgrade: %d buffers of %zu KiB through a %zu MiB GPU space (trigger %.2f, stop %.2f) "
      "in %.1f ms\n"
      "%s reservations: %llu, mean latency %.1f us, max %.1f us (waits included); "
      "%llu found room at once: mean %.2f us, max %.1f us; %llu waited for room: "
      "%.1f ms in all, longest %.1f ms; timeouts %llu\n"
      "%s moved: %llu down (%.0f MiB), %llu up (%.0f MiB), %.2f GB/s over %.1f ms of copies; "
      "downgrades started %llu; GPU peak %.0f MiB\n"
      "%s host: NUMA machine %d, placed %llu, unplaced %llu (errno %d); host peak %.0f MiB; "
      "%zu chunks of %.1f MiB pinned at create\n"
      "%s time: build %.1f ms; produce %.1f ms (GPU allocations %.1f ms, fills %.1f ms); "
      "host blocks for moves down %.1f ms (pinning fresh chunks included); copies %.1f ms; "
      "consume %.1f ms (read back and check %.1f ms)\n",
      tag, c.buffers, c.buffer_bytes >> 10, c.gpu_bytes >> 20, c.trigger, c.stop, r.elapsed_ms,
      tag, (unsigned long long)ms.reserve_count,
      ms.reserve_count ? ms.reserve_latency_ns / 1e3 / ms.reserve_count : 0.0,
      ms.max_reserve_latency_ns / 1e3, (unsigned long long)ms.immediate_reserve_count,
      ms.immediate_reserve_count
          ? ms.immediate_reserve_latency_ns / 1e3 / ms.immediate_reserve_count
          : 0.0,
      ms.max_immediate_reserve_latency_ns / 1e3, (unsigned long long)waited, ms.wait_ns / 1e6,
      ms.max_wait_ns / 1e6, (unsigned long long)ms.timeout_count, tag,
      (unsigned long long)r.moves_down, r.bytes_down / 1048576.0,
      (unsigned long long)r.moves_up, r.bytes_up / 1048576.0,
      r.copy_ns ? moved_gb / (r.copy_ns / 1e9) : 0.0, r.copy_ns / 1e6,
      (unsigned long long)r.gpu.downgrade_start_count, r.gpu.peak_allocated_bytes / 1048576.0, tag,
      r.numa.numa_machine ? 1 : 0, (unsigned long long)r.numa.placed_count,
      (unsigned long long)r.numa.unplaced_count, r.numa.last_placement_errno,
      r.host.peak_allocated_bytes / 1048576.0, c.host_initial_chunks,
      (c.host_block_bytes * c.host_blocks_per_chunk) / 1048576.0, tag, r.build_ms, r.produce_ms,
      r.gpu_alloc_ns / 1e6, r.fill_ns / 1e6, r.host_alloc_ns / 1e6, r.copy_ns / 1e6,
      r.consume_ms, r.verify_ns / 1e6);
}

}  // namespace gmr_test

#endif  // GMR_TESTS_TIERS_DOWNGRADE_WORKLOAD_H_
