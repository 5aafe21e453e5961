// nvtx_overflow_demo: the positive control for gmr's NVTX memory annotations
// (core/nvtx_mem), run under Compute Sanitizer by run_sanitizer_checks.sh.
//
// A test-only sub-allocator carves two adjacent blocks out of one cudaMalloc
// chunk: block A (1000 bytes asked, rounded to 1024 in the pool) and block B
// right after it. Then something writes past the end of A, into A's rounding
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

namespace {

// PTX of:
//   extern "C" __global__ void gmr_fill_bytes(unsigned char *p,
//       unsigned long long n, unsigned int v) {
//     unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
//     if (i < n) p[i] = (unsigned char)v;
//   }
// from `nvcc -ptx -arch=compute_75` (CUDA 13.0); the driver compiles it for
// the device at load time.
const char kFillPtx[] = R"(
.version 9.0
.target sm_75
.address_size 64

.visible .entry gmr_fill_bytes(
	.param .u64 gmr_fill_bytes_param_0,
	.param .u64 gmr_fill_bytes_param_1,
	.param .u32 gmr_fill_bytes_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<5>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd2, [gmr_fill_bytes_param_0];
	ld.param.u64 	%rd3, [gmr_fill_bytes_param_1];
	ld.param.u32 	%r1, [gmr_fill_bytes_param_2];
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %ntid.x;
	mul.wide.u32 	%rd4, %r2, %r3;
	mov.u32 	%r4, %tid.x;
	cvt.u64.u32 	%rd5, %r4;
	add.s64 	%rd1, %rd4, %rd5;
	setp.ge.u64 	%p1, %rd1, %rd3;
	@%p1 bra 	$L__BB0_2;

	cvta.to.global.u64 	%rd6, %rd2;
	add.s64 	%rd7, %rd6, %rd1;
	st.global.u8 	[%rd7], %r1;

$L__BB0_2:
	ret;
}
)";

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

}  // namespace

int main(int argc, char **argv) {
  bool annotate = true, into_next = false, keep_regions = false;
  std::string via = "kernel";
  size_t overflow = 8;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--annotate") {
      annotate = true;
    } else if (a == "--no-annotate") {
      annotate = false;
    } else if (a.rfind("--via=", 0) == 0) {
      via = a.substr(6);
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
  pool.annotate = annotate;
  if (!check(cudaMalloc(reinterpret_cast<void **>(&pool.chunk), kChunkBytes), "cudaMalloc")) {
    return 1;
  }
  if (annotate) {
    pool.heap = gmr__nvtx_mem_heap_register(pool.chunk, kChunkBytes, "nvtx_overflow_demo chunk");
  }
  unsigned char *a = pool.allocate(a_bytes);
  unsigned char *b = pool.allocate(kBlockAsked);
  std::printf("nvtx_overflow_demo: annotate=%s via=%s chunk=%p A=%p (%zu B) B=%p (%zu B); "
              "writing %zu bytes from A (%zu past its end)%s\n",
              annotate ? "yes" : "no", via.c_str(), static_cast<void *>(pool.chunk),
              static_cast<void *>(a), a_bytes, static_cast<void *>(b), kBlockAsked,
              write_bytes, write_bytes - a_bytes,
              annotate && pool.heap == nullptr ? " [no NVTX tool attached: heap is NULL]" : "");

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
    cudaLibrary_t library = nullptr;
    cudaKernel_t kernel = nullptr;
    if (!check(cudaLibraryLoadData(&library, kFillPtx, nullptr, nullptr, 0, nullptr, nullptr, 0),
               "cudaLibraryLoadData") ||
        !check(cudaLibraryGetKernel(&kernel, library, "gmr_fill_bytes"), "cudaLibraryGetKernel")) {
      return 1;
    }
    unsigned long long n = write_bytes;
    unsigned int value = 0x33;
    void *args[] = {&a, &n, &value};
    write_err = cudaLaunchKernel(reinterpret_cast<const void *>(kernel),
                                 dim3(static_cast<unsigned>((write_bytes + 255) / 256)), dim3(256),
                                 args, 0, stream);
    if (write_err == cudaSuccess) write_err = cudaStreamSynchronize(stream);
    cudaLibraryUnload(library);
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
  if (!keep_regions) {
    pool.free_block(b);
    pool.free_block(a);
  }
  if (annotate && !keep_regions) gmr__nvtx_mem_heap_unregister(pool.heap);
  cudaStreamDestroy(stream);
  cudaFree(pool.chunk);
  return 0;
}
