// tests/gpu/canary_kernels.h: the kernels of the stream canary
// (stream_canary_gpu_test.cc), as PTX loaded at run time with
// cudaLibraryLoadData (no nvcc needed to build). PTX of this CUDA C from
// `nvcc -ptx -arch=compute_75` (CUDA 13.0); the driver compiles it for the
// device at load time:
//
//   __device__ __forceinline__ unsigned canary_word(unsigned long long i, unsigned s) {
//     return (unsigned)(i * 2654435761ull) ^ s;
//   }
//
//   extern "C" __global__ void gmr_canary_fill(unsigned *p, unsigned long long n, unsigned seed) {
//     unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
//     for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
//          i += stride) {
//       p[i] = canary_word(i, seed);
//     }
//   }
//
//   // rec: [0] words that differed, [1] first differing index + 1 (0: none),
//   // [2] the word found there, [3] passes done.
//   extern "C" __global__ void gmr_canary_check(const unsigned *p, unsigned long long n,
//                                               unsigned seed, unsigned passes,
//                                               long long spin_cycles, unsigned long long *rec,
//                                               unsigned *started) {
//     if (started != 0 && blockIdx.x == 0 && threadIdx.x == 0) {
//       *(volatile unsigned *)started = 1u;
//       __threadfence_system();
//     }
//     const volatile unsigned *v = p;
//     unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
//     unsigned long long bad = 0;
//     for (unsigned pass = 0; pass < passes; ++pass) {
//       for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
//            i < n; i += stride) {
//         unsigned w = v[i];
//         if (w != canary_word(i, seed)) {
//           if (bad == 0 && atomicCAS(&rec[1], 0ull, i + 1) == 0ull) rec[2] = w;
//           ++bad;
//         }
//       }
//       long long start = clock64();
//       while (clock64() - start < spin_cycles) {
//       }
//     }
//     if (bad != 0) atomicAdd(&rec[0], bad);
//     if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&rec[3], (unsigned long long)passes);
//   }
//
// The check reads through a volatile pointer (ld.volatile: not cached in L1),
// so every pass sees what other SMs wrote since the last: a write of another
// stream into the buffer while the check runs shows as differing words.
#ifndef GMR_TESTS_GPU_CANARY_KERNELS_H_
#define GMR_TESTS_GPU_CANARY_KERNELS_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace gmr_test {

inline constexpr char kCanaryPtx[] = R"(
.version 9.0
.target sm_75
.address_size 64


.visible .entry gmr_canary_fill(
	.param .u64 gmr_canary_fill_param_0,
	.param .u64 gmr_canary_fill_param_1,
	.param .u32 gmr_canary_fill_param_2
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<9>;
	.reg .b64 	%rd<15>;


	ld.param.u64 	%rd7, [gmr_canary_fill_param_0];
	ld.param.u64 	%rd8, [gmr_canary_fill_param_1];
	ld.param.u32 	%r1, [gmr_canary_fill_param_2];
	mov.u32 	%r2, %ntid.x;
	cvt.u64.u32 	%rd1, %r2;
	mov.u32 	%r3, %ctaid.x;
	mul.wide.u32 	%rd9, %r3, %r2;
	mov.u32 	%r4, %tid.x;
	cvt.u64.u32 	%rd10, %r4;
	add.s64 	%rd14, %rd9, %rd10;
	setp.ge.u64 	%p1, %rd14, %rd8;
	@%p1 bra 	$L__BB0_3;

	mov.u32 	%r5, %nctaid.x;
	cvt.u64.u32 	%rd11, %r5;
	mul.lo.s64 	%rd3, %rd11, %rd1;
	cvta.to.global.u64 	%rd4, %rd7;

$L__BB0_2:
	cvt.u32.u64 	%r6, %rd14;
	mul.lo.s32 	%r7, %r6, -1640531535;
	xor.b32  	%r8, %r7, %r1;
	shl.b64 	%rd12, %rd14, 2;
	add.s64 	%rd13, %rd4, %rd12;
	st.global.u32 	[%rd13], %r8;
	add.s64 	%rd14, %rd14, %rd3;
	setp.lt.u64 	%p2, %rd14, %rd8;
	@%p2 bra 	$L__BB0_2;

$L__BB0_3:
	ret;

}
.visible .entry gmr_canary_check(
	.param .u64 gmr_canary_check_param_0,
	.param .u64 gmr_canary_check_param_1,
	.param .u32 gmr_canary_check_param_2,
	.param .u32 gmr_canary_check_param_3,
	.param .u64 gmr_canary_check_param_4,
	.param .u64 gmr_canary_check_param_5,
	.param .u64 gmr_canary_check_param_6
)
{
	.reg .pred 	%p<14>;
	.reg .b32 	%r<17>;
	.reg .b64 	%rd<44>;


	ld.param.u64 	%rd14, [gmr_canary_check_param_0];
	ld.param.u64 	%rd15, [gmr_canary_check_param_1];
	ld.param.u32 	%r7, [gmr_canary_check_param_2];
	ld.param.u32 	%r8, [gmr_canary_check_param_3];
	ld.param.u64 	%rd16, [gmr_canary_check_param_4];
	ld.param.u64 	%rd18, [gmr_canary_check_param_5];
	ld.param.u64 	%rd17, [gmr_canary_check_param_6];
	cvta.to.global.u64 	%rd1, %rd18;
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %ctaid.x;
	or.b32  	%r3, %r2, %r1;
	setp.ne.s32 	%p1, %r3, 0;
	setp.eq.s64 	%p2, %rd17, 0;
	or.pred  	%p3, %p1, %p2;
	@%p3 bra 	$L__BB1_2;

	cvta.to.global.u64 	%rd19, %rd17;
	mov.u32 	%r9, 1;
	st.volatile.global.u32 	[%rd19], %r9;
	membar.sys;

$L__BB1_2:
	setp.eq.s32 	%p4, %r8, 0;
	mov.u64 	%rd41, 0;
	@%p4 bra 	$L__BB1_15;

	mov.u32 	%r11, %ntid.x;
	mul.wide.u32 	%rd22, %r2, %r11;
	cvt.u64.u32 	%rd23, %r1;
	add.s64 	%rd2, %rd22, %rd23;
	cvta.to.global.u64 	%rd3, %rd14;
	mov.u32 	%r12, %nctaid.x;
	mul.wide.u32 	%rd4, %r12, %r11;
	mov.u64 	%rd41, 0;
	mov.u32 	%r16, 0;

$L__BB1_4:
	setp.ge.u64 	%p5, %rd2, %rd15;
	@%p5 bra 	$L__BB1_12;

	mov.u64 	%rd39, %rd2;

$L__BB1_6:
	shl.b64 	%rd24, %rd39, 2;
	add.s64 	%rd25, %rd3, %rd24;
	ld.volatile.global.u32 	%r5, [%rd25];
	cvt.u32.u64 	%r13, %rd39;
	mul.lo.s32 	%r14, %r13, -1640531535;
	xor.b32  	%r15, %r14, %r7;
	setp.eq.s32 	%p6, %r5, %r15;
	@%p6 bra 	$L__BB1_11;

	setp.ne.s64 	%p7, %rd41, 0;
	@%p7 bra 	$L__BB1_10;

	add.s64 	%rd26, %rd39, 1;
	add.s64 	%rd27, %rd1, 8;
	mov.u64 	%rd28, 0;
	atom.global.cas.b64 	%rd29, [%rd27], %rd28, %rd26;
	setp.ne.s64 	%p8, %rd29, 0;
	@%p8 bra 	$L__BB1_10;

	cvt.u64.u32 	%rd30, %r5;
	st.global.u64 	[%rd1+16], %rd30;

$L__BB1_10:
	add.s64 	%rd41, %rd41, 1;

$L__BB1_11:
	add.s64 	%rd39, %rd39, %rd4;
	setp.lt.u64 	%p9, %rd39, %rd15;
	@%p9 bra 	$L__BB1_6;

$L__BB1_12:
	// begin inline asm
	mov.u64 	%rd31, %clock64;
	// end inline asm

$L__BB1_13:
	// begin inline asm
	mov.u64 	%rd32, %clock64;
	// end inline asm
	sub.s64 	%rd33, %rd32, %rd31;
	setp.lt.s64 	%p10, %rd33, %rd16;
	@%p10 bra 	$L__BB1_13;

	add.s32 	%r16, %r16, 1;
	setp.lt.u32 	%p11, %r16, %r8;
	@%p11 bra 	$L__BB1_4;

$L__BB1_15:
	setp.eq.s64 	%p12, %rd41, 0;
	@%p12 bra 	$L__BB1_17;

	atom.global.add.u64 	%rd34, [%rd1], %rd41;

$L__BB1_17:
	@%p1 bra 	$L__BB1_19;

	add.s64 	%rd35, %rd1, 24;
	cvt.u64.u32 	%rd36, %r8;
	atom.global.add.u64 	%rd37, [%rd35], %rd36;

$L__BB1_19:
	ret;

}
)";

// The word gmr_canary_fill writes at word index i under `seed`.
inline uint32_t CanaryWord(uint64_t i, uint32_t seed) {
  return static_cast<uint32_t>(i * 2654435761ull) ^ seed;
}

// What one gmr_canary_check launch found (its `rec`, four words).
struct CanaryRecord {
  unsigned long long wrong_words;
  unsigned long long first_wrong_plus_one;  // 0: none
  unsigned long long word_found;            // at the first wrong index
  unsigned long long passes;                // passes done (all blocks finished when == asked)
};

class CanaryKernels {
 public:
  CanaryKernels() = default;
  CanaryKernels(const CanaryKernels &) = delete;
  CanaryKernels &operator=(const CanaryKernels &) = delete;
  ~CanaryKernels() {
    if (library_ != nullptr) cudaLibraryUnload(library_);
  }

  // The first failing CUDA call's error (cudaSuccess when loaded).
  cudaError_t load() {
    cudaError_t err =
        cudaLibraryLoadData(&library_, kCanaryPtx, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (err == cudaSuccess) err = cudaLibraryGetKernel(&fill_, library_, "gmr_canary_fill");
    if (err == cudaSuccess) err = cudaLibraryGetKernel(&check_, library_, "gmr_canary_check");
    return err;
  }

  // Writes the pattern of `seed` over the bytes / 4 words at `p` on `stream`.
  cudaError_t fill(void *p, size_t bytes, uint32_t seed, cudaStream_t stream) const {
    unsigned long long n = bytes / 4;
    if (n == 0) return cudaSuccess;
    unsigned s = seed;
    void *args[] = {&p, &n, &s};
    unsigned blocks = static_cast<unsigned>(std::min<unsigned long long>((n + 255) / 256, 1024));
    return cudaLaunchKernel(reinterpret_cast<const void *>(fill_), dim3(blocks), dim3(256), args,
                            0, stream);
  }

  // Reads the words at `p` `passes` times, `spin_cycles` clock ticks apart,
  // counting those that differ from the pattern of `seed` into `rec` (device
  // memory, four words); sets *started (host-mapped, may be null) when it
  // begins. `blocks` of 256 threads: few, so other streams' kernels run beside.
  cudaError_t check(const void *p, size_t bytes, uint32_t seed, unsigned passes,
                    long long spin_cycles, CanaryRecord *rec, unsigned *started, unsigned blocks,
                    cudaStream_t stream) const {
    unsigned long long n = bytes / 4;
    unsigned s = seed;
    void *args[] = {&p, &n, &s, &passes, &spin_cycles, &rec, &started};
    return cudaLaunchKernel(reinterpret_cast<const void *>(check_), dim3(blocks), dim3(256), args,
                            0, stream);
  }

 private:
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t fill_ = nullptr;
  cudaKernel_t check_ = nullptr;
};

}  // namespace gmr_test

#endif  // GMR_TESTS_GPU_CANARY_KERNELS_H_
