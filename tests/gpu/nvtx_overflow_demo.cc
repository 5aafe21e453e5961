// nvtx_overflow_demo: the positive control for gmr's NVTX memory annotations
// (core/nvtx_mem), run under Compute Sanitizer by run_sanitizer_checks.sh.
//
// A sub-allocator carves two adjacent blocks out of one cudaMalloc chunk:
// block A (1000 bytes asked, rounded to 1024) and block B right after it.
// The sub-allocator is a test-only one that calls core/nvtx_mem directly
// (--allocator=demo, the default) or gmr's real pool_resource with
// nvtx_annotate (--allocator=pool: one arena, no cache of recent frees, over
// cuda_resource(kind=device), so A and B are the first two blocks of its first
// chunk; the pool rounds to 256, so A's 1000 bytes also leave 24 bytes of
// padding). Then something writes past the end of A, into A's rounding
// padding, which belongs to no block:
//
//   compute-sanitizer --tool memcheck ./nvtx_overflow_demo --no-annotate
//       silent: to memcheck the whole chunk is one valid cudaMalloc.
//   compute-sanitizer --tool memcheck ./nvtx_overflow_demo --annotate
//       "Invalid __global__ write": the chunk is an NVTX sub-allocator heap,
//       A and B are regions, the padding is in neither.
//
// Options:
//   --annotate | --no-annotate   register the chunk and blocks (default: annotate)
//   --allocator=demo|pool        the test-only sub-allocator or gmr's pool_resource
//   --via=kernel|memset|memcpy   how to write (default kernel: a PTX kernel
//                                loaded at run time, no nvcc needed to build)
//   --overflow=N                 bytes written past A's 1000 (default 8; 0 = none:
//                                the negative control with annotation on)
//   --into-next-block            A asks for the whole 1024-byte slot (no padding)
//                                and the overflow lands in B, a live block: no
//                                tool can tell that from a legal write to B, so
//                                memcheck stays silent (the method's limit)
//   --keep-regions               leave the regions registered at exit (for
//                                --leak-check=full, which reports them)
// Exit status: 0 when every CUDA call before the write succeeded (the write
// itself may be stopped by the sanitizer), 1 on a setup failure or bad
// arguments, 2 when there is no CUDA device.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/nvtx_mem.h"
#include "gmr/cuda_resource.h"
#include "gmr/pool_resource.h"
#include "tests/gpu/fill_kernel.h"

namespace {


constexpr size_t kChunkBytes = size_t{1} << 20;
constexpr size_t kBlockAsked = 1000;   // what the user asks for block A (and B)
constexpr size_t kBlockRounded = 1024; // what the pool sets aside for each

bool check(cudaError_t err, const char *what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "nvtx_overflow_demo: %s failed: %s (%s)\n", what, cudaGetErrorName(err),
               cudaGetErrorString(err));
  return false;
}

// The test-only sub-allocator: fixed 1024-byte slots carved from one chunk,
// annotated through gmr's core/nvtx_mem exactly as a pool does.
struct DemoPool {
  unsigned char *chunk = nullptr;
  void *heap = nullptr;
  bool annotate = false;
  size_t next = 0;

  unsigned char *allocate(size_t bytes) {
    size_t rounded = (bytes + kBlockRounded - 1) / kBlockRounded * kBlockRounded;
    unsigned char *p = chunk + next;
    next += rounded;
    // The region is what was asked for, not the rounded slot: the padding
    // stays unregistered, so a write into it is caught.
    if (annotate) gmr__nvtx_mem_region_register(heap, p, bytes);
    return p;
  }

  void free_block(unsigned char *p) {
    if (annotate) gmr__nvtx_mem_region_unregister(p);
  }
};

// gmr's pool_resource over cuda_resource(kind=device), annotated or not.
struct RealPool {
  gmr_cuda_resource *cuda = nullptr;
  gmr_pool_resource *pool = nullptr;

  bool create(bool annotate) {
    gmr_cuda_resource_config cc = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
    cc.kind = GMR_CUDA_KIND_DEVICE;
    gmr_pool_resource_config pc = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
    pc.arena_count = 1;          // one chunk list: A and B come from the same chunk
    pc.recent_free_count = 0;    // no cache of recent frees
    pc.initial_pool_bytes = kChunkBytes;
    pc.streams.nvtx_annotate = annotate;
    gmr_status st = gmr_cuda_resource_create(&cc, &cuda);
    if (st == GMR_OK) st = gmr_pool_resource_create(gmr_cuda_resource_as_resource(cuda), &pc, &pool);
    if (st != GMR_OK) {
      std::fprintf(stderr, "nvtx_overflow_demo: creating the pool failed: %s\n",
                   gmr_status_name(st));
      return false;
    }
    return true;
  }

  unsigned char *allocate(size_t bytes) {
    void *p = nullptr;
    gmr_status st =
        gmr_resource_allocate(gmr_pool_resource_as_resource(pool), bytes, 0, nullptr, &p);
    if (st != GMR_OK) {
      std::fprintf(stderr, "nvtx_overflow_demo: pool allocate failed: %s\n", gmr_status_name(st));
    }
    return static_cast<unsigned char *>(p);
  }

  void free_block(unsigned char *p, size_t bytes) {
    (void)gmr_resource_deallocate(gmr_pool_resource_as_resource(pool), p, bytes, 0, nullptr);
  }

  void destroy() {
    (void)gmr_resource_destroy(gmr_pool_resource_as_resource(pool));
    (void)gmr_resource_destroy(gmr_cuda_resource_as_resource(cuda));
  }
};

}  // namespace

int main(int argc, char **argv) {
  bool annotate = true, into_next = false, keep_regions = false;
  std::string via = "kernel", allocator = "demo";
  size_t overflow = 8;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--annotate") {
      annotate = true;
    } else if (a == "--no-annotate") {
      annotate = false;
    } else if (a.rfind("--via=", 0) == 0) {
      via = a.substr(6);
    } else if (a.rfind("--allocator=", 0) == 0) {
      allocator = a.substr(12);
    } else if (a.rfind("--overflow=", 0) == 0) {
      overflow = std::strtoull(a.c_str() + 11, nullptr, 10);
    } else if (a == "--into-next-block") {
      into_next = true;
    } else if (a == "--keep-regions") {
      keep_regions = true;
    } else {
      std::fprintf(stderr, "nvtx_overflow_demo: unknown argument '%s'\n", a.c_str());
      return 1;
    }
  }
  if (via != "kernel" && via != "memset" && via != "memcpy") {
    std::fprintf(stderr, "nvtx_overflow_demo: --via must be kernel, memset or memcpy\n");
    return 1;
  }
  if (allocator != "demo" && allocator != "pool") {
    std::fprintf(stderr, "nvtx_overflow_demo: --allocator must be demo or pool\n");
    return 1;
  }
  const bool real = allocator == "pool";
  const size_t a_bytes = into_next ? kBlockRounded : kBlockAsked;
  const size_t write_bytes = a_bytes + overflow;
  if (write_bytes > kBlockRounded + kBlockAsked) {
    std::fprintf(stderr, "nvtx_overflow_demo: --overflow too large (max %zu)\n",
                 kBlockRounded + kBlockAsked - a_bytes);
    return 1;
  }

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("nvtx_overflow_demo: SKIPPED: no CUDA device\n");
    return 2;
  }
  // The CUDA runtime must be initialised before the first NVTX memory call.
  if (!check(cudaSetDevice(0), "cudaSetDevice") || !check(cudaFree(nullptr), "cudaFree(0)")) {
    return 1;
  }

  DemoPool pool;
  RealPool real_pool;
  pool.annotate = annotate;
  unsigned char *a = nullptr, *b = nullptr;
  if (real) {
    if (!real_pool.create(annotate)) return 1;
    a = real_pool.allocate(a_bytes);
    b = real_pool.allocate(kBlockAsked);
    if (a == nullptr || b == nullptr) return 1;
    // The pool rounds to 256 bytes: B starts right after A's rounded size.
    if (b != a + (a_bytes + 255) / 256 * 256) {
      std::fprintf(stderr, "nvtx_overflow_demo: the pool's blocks are not adjacent (A=%p B=%p)\n",
                   static_cast<void *>(a), static_cast<void *>(b));
      return 1;
    }
  } else {
    if (!check(cudaMalloc(reinterpret_cast<void **>(&pool.chunk), kChunkBytes), "cudaMalloc")) {
      return 1;
    }
    if (annotate) {
      pool.heap =
          gmr__nvtx_mem_heap_register(pool.chunk, kChunkBytes, "nvtx_overflow_demo chunk");
    }
    a = pool.allocate(a_bytes);
    b = pool.allocate(kBlockAsked);
  }
  std::printf("nvtx_overflow_demo: allocator=%s annotate=%s via=%s A=%p (%zu B) B=%p (%zu B); "
              "writing %zu bytes from A (%zu past its end)%s\n",
              allocator.c_str(), annotate ? "yes" : "no", via.c_str(), static_cast<void *>(a),
              a_bytes, static_cast<void *>(b), kBlockAsked, write_bytes, write_bytes - a_bytes,
              !real && annotate && pool.heap == nullptr
                  ? " [no NVTX tool attached: heap is NULL]"
                  : "");

  // Legal writes first: both blocks, exactly.
  cudaStream_t stream = nullptr;
  if (!check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
      !check(cudaMemsetAsync(a, 0x11, a_bytes, stream), "cudaMemsetAsync(A)") ||
      !check(cudaMemsetAsync(b, 0x22, kBlockAsked, stream), "cudaMemsetAsync(B)") ||
      !check(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) {
    return 1;
  }

  cudaError_t write_err = cudaSuccess;
  if (via == "kernel") {
    gmr_test::FillKernel kernel;
    if (!check(kernel.load(), "loading the fill kernel")) return 1;
    write_err = kernel.fill(a, write_bytes, 0x33, stream);
    if (write_err == cudaSuccess) write_err = cudaStreamSynchronize(stream);
  } else if (via == "memset") {
    write_err = cudaMemsetAsync(a, 0x33, write_bytes, stream);
    if (write_err == cudaSuccess) write_err = cudaStreamSynchronize(stream);
  } else {
    std::vector<unsigned char> host(write_bytes, 0x33);
    write_err = cudaMemcpy(a, host.data(), write_bytes, cudaMemcpyHostToDevice);
  }
  std::printf("nvtx_overflow_demo: the write returned %s\n", cudaGetErrorName(write_err));

  // Best-effort cleanup: after a sanitizer stops the kernel the context may
  // be unusable, which is the expected outcome, not a failure of the demo.
  if (real) {
    // --keep-regions: leave the blocks allocated (their regions live) and
    // the pool alive at exit.
    if (!keep_regions) {
      real_pool.free_block(b, kBlockAsked);
      real_pool.free_block(a, a_bytes);
      real_pool.destroy();
    }
    cudaStreamDestroy(stream);
    return 0;
  }
  if (!keep_regions) {
    pool.free_block(b);
    pool.free_block(a);
  }
  if (annotate && !keep_regions) gmr__nvtx_mem_heap_unregister(pool.heap);
  cudaStreamDestroy(stream);
  cudaFree(pool.chunk);
  return 0;
}
