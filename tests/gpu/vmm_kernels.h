// tests/gpu/vmm_kernels.h: device kernels for the VMM GPU tests and
// tools, as PTX loaded at run time with cudaLibraryLoadData (no nvcc needed
// to build):
//   gmr_fill_pattern(p, n, seed)   p[i] = byte of (i * 2654435761 + seed) >> 11
//   gmr_copy_bytes(dst, src, n)    dst[i] = src[i]
//   gmr_wait_flag(flag, max_cycles) spin until *flag != 0 (a host-mapped int),
//                                  or max_cycles clock ticks, whichever first
// PTX from `nvcc -ptx -arch=compute_75` (CUDA 13.0) of the obvious CUDA C++;
// the driver compiles it for the device at load time.
#ifndef GMR_TESTS_GPU_VMM_KERNELS_H_
#define GMR_TESTS_GPU_VMM_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gmr_test {

inline constexpr char kVmmPtx[] = R"(
.version 9.0
.target sm_75
.address_size 64


.visible .entry gmr_wait_flag(
	.param .u64 gmr_wait_flag_param_0,
	.param .u64 gmr_wait_flag_param_1
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<8>;


	ld.param.u64 	%rd5, [gmr_wait_flag_param_0];
	ld.param.u64 	%rd3, [gmr_wait_flag_param_1];
	cvta.to.global.u64 	%rd1, %rd5;
	mov.u64 	%rd4, %clock64;

$L__BB0_1:
	ld.volatile.global.u32 	%r1, [%rd1];
	setp.ne.s32 	%p1, %r1, 0;
	@%p1 bra 	$L__BB0_3;

	mov.u64 	%rd6, %clock64;
	sub.s64 	%rd7, %rd6, %rd4;
	setp.lt.s64 	%p2, %rd7, %rd3;
	@%p2 bra 	$L__BB0_1;

$L__BB0_3:
	ret;

}
.visible .entry gmr_copy_bytes(
	.param .u64 gmr_copy_bytes_param_0,
	.param .u64 gmr_copy_bytes_param_1,
	.param .u64 gmr_copy_bytes_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .b16 	%rs<2>;
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<11>;


	ld.param.u64 	%rd2, [gmr_copy_bytes_param_0];
	ld.param.u64 	%rd3, [gmr_copy_bytes_param_1];
	ld.param.u64 	%rd4, [gmr_copy_bytes_param_2];
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mul.wide.u32 	%rd5, %r1, %r2;
	mov.u32 	%r3, %tid.x;
	cvt.u64.u32 	%rd6, %r3;
	add.s64 	%rd1, %rd5, %rd6;
	setp.ge.u64 	%p1, %rd1, %rd4;
	@%p1 bra 	$L__BB1_2;

	cvta.to.global.u64 	%rd7, %rd3;
	add.s64 	%rd8, %rd7, %rd1;
	ld.global.u8 	%rs1, [%rd8];
	cvta.to.global.u64 	%rd9, %rd2;
	add.s64 	%rd10, %rd9, %rd1;
	st.global.u8 	[%rd10], %rs1;

$L__BB1_2:
	ret;

}
.visible .entry gmr_fill_pattern(
	.param .u64 gmr_fill_pattern_param_0,
	.param .u64 gmr_fill_pattern_param_1,
	.param .u32 gmr_fill_pattern_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<5>;
	.reg .b64 	%rd<12>;


	ld.param.u64 	%rd2, [gmr_fill_pattern_param_0];
	ld.param.u64 	%rd3, [gmr_fill_pattern_param_1];
	ld.param.u32 	%r1, [gmr_fill_pattern_param_2];
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %ntid.x;
	mul.wide.u32 	%rd4, %r2, %r3;
	mov.u32 	%r4, %tid.x;
	cvt.u64.u32 	%rd5, %r4;
	add.s64 	%rd1, %rd4, %rd5;
	setp.ge.u64 	%p1, %rd1, %rd3;
	@%p1 bra 	$L__BB2_2;

	cvta.to.global.u64 	%rd6, %rd2;
	cvt.u64.u32 	%rd7, %r1;
	mul.lo.s64 	%rd8, %rd1, 2654435761;
	add.s64 	%rd9, %rd8, %rd7;
	shr.u64 	%rd10, %rd9, 11;
	add.s64 	%rd11, %rd6, %rd1;
	st.global.u8 	[%rd11], %rd10;

$L__BB2_2:
	ret;

}
)";

// The byte gmr_fill_pattern writes at index i.
inline unsigned char PatternByte(uint64_t i, unsigned seed) {
  return static_cast<unsigned char>((i * 2654435761ull + seed) >> 11);
}

class VmmKernels {
 public:
  VmmKernels() = default;
  VmmKernels(const VmmKernels &) = delete;
  VmmKernels &operator=(const VmmKernels &) = delete;
  ~VmmKernels() {
    if (library_ != nullptr) cudaLibraryUnload(library_);
  }

  // The first failing CUDA call's error (cudaSuccess when loaded).
  cudaError_t load() {
    cudaError_t err =
        cudaLibraryLoadData(&library_, kVmmPtx, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (err == cudaSuccess) err = cudaLibraryGetKernel(&fill_, library_, "gmr_fill_pattern");
    if (err == cudaSuccess) err = cudaLibraryGetKernel(&copy_, library_, "gmr_copy_bytes");
    if (err == cudaSuccess) err = cudaLibraryGetKernel(&wait_, library_, "gmr_wait_flag");
    return err;
  }

  cudaError_t fill(void *p, size_t bytes, unsigned seed, cudaStream_t stream) const {
    unsigned long long n = bytes;
    void *args[] = {&p, &n, &seed};
    return launch(fill_, bytes, args, stream);
  }

  cudaError_t copy(void *dst, const void *src, size_t bytes, cudaStream_t stream) const {
    unsigned long long n = bytes;
    void *args[] = {&dst, &src, &n};
    return launch(copy_, bytes, args, stream);
  }

  cudaError_t wait_flag(const int *flag, long long max_cycles, cudaStream_t stream) const {
    void *args[] = {&flag, &max_cycles};
    return cudaLaunchKernel(reinterpret_cast<const void *>(wait_), dim3(1), dim3(1), args, 0,
                            stream);
  }

 private:
  static cudaError_t launch(cudaKernel_t k, size_t bytes, void **args, cudaStream_t stream) {
    if (bytes == 0) return cudaSuccess;
    return cudaLaunchKernel(reinterpret_cast<const void *>(k),
                            dim3(static_cast<unsigned>((bytes + 255) / 256)), dim3(256), args, 0,
                            stream);
  }

  cudaLibrary_t library_ = nullptr;
  cudaKernel_t fill_ = nullptr;
  cudaKernel_t copy_ = nullptr;
  cudaKernel_t wait_ = nullptr;
};

}  // namespace gmr_test

#endif  // GMR_TESTS_GPU_VMM_KERNELS_H_
