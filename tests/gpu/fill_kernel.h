// tests/gpu/fill_kernel.h: a device kernel for the GPU tests and tools that
// must write memory with a KERNEL (Compute Sanitizer's memcheck checks kernel
// accesses against NVTX memory regions; cudaMemset and cudaMemcpy ranges are
// not checked that way). The kernel is PTX, loaded at run time with
// cudaLibraryLoadData, so no nvcc is needed to build.
#ifndef GMR_TESTS_GPU_FILL_KERNEL_H_
#define GMR_TESTS_GPU_FILL_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace gmr_test {

// PTX of:
//   extern "C" __global__ void gmr_fill_bytes(unsigned char *p,
//       unsigned long long n, unsigned int v) {
//     unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
//     if (i < n) p[i] = (unsigned char)v;
//   }
// from `nvcc -ptx -arch=compute_75` (CUDA 13.0); the driver compiles it for
// the device at load time.
inline constexpr char kFillPtx[] = R"(
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

// gmr_fill_bytes loaded once; fill() writes `bytes` bytes of `value` at `p`
// on `stream` (stream-ordered, capturable), one thread per byte.
class FillKernel {
 public:
  FillKernel() = default;
  FillKernel(const FillKernel &) = delete;
  FillKernel &operator=(const FillKernel &) = delete;
  ~FillKernel() {
    if (library_ != nullptr) cudaLibraryUnload(library_);
  }

  // Returns the first failing CUDA call's error (cudaSuccess when loaded).
  cudaError_t load() {
    cudaError_t err =
        cudaLibraryLoadData(&library_, kFillPtx, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (err == cudaSuccess) err = cudaLibraryGetKernel(&kernel_, library_, "gmr_fill_bytes");
    return err;
  }

  cudaError_t fill(void *p, size_t bytes, unsigned char value, cudaStream_t stream) const {
    if (bytes == 0) return cudaSuccess;
    unsigned long long n = bytes;
    unsigned int v = value;
    void *args[] = {&p, &n, &v};
    return cudaLaunchKernel(reinterpret_cast<const void *>(kernel_),
                            dim3(static_cast<unsigned>((bytes + 255) / 256)), dim3(256), args, 0,
                            stream);
  }

 private:
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t kernel_ = nullptr;
};

}  // namespace gmr_test

#endif  // GMR_TESTS_GPU_FILL_KERNEL_H_
