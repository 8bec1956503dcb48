// diag(A) @ B == A[:, None] * B: the N x N diagonal matrix is never built and no GEMM runs; each
// output row is row i of B scaled by A[i]. Memory-bound: blockIdx.y walks rows (A[i] is read once
// per block into a register), blockIdx.x/threads walk the row in float4s, grid-stride on both axes.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

__global__ void diag_matmul_vec4_kernel(const float* __restrict__ a, const float4* __restrict__ b,
                                        float4* __restrict__ c, int64_t n, int64_t m4) {
  for (int64_t row = blockIdx.y; row < n; row += gridDim.y) {
    const float s = __ldg(&a[row]);
    const float4* brow = b + row * m4;
    float4* crow = c + row * m4;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < m4; j += (int64_t)gridDim.x * blockDim.x) {
      float4 v = __ldg(&brow[j]);
      v.x *= s; v.y *= s; v.z *= s; v.w *= s;
      crow[j] = v;
    }
  }
}

__global__ void diag_matmul_scalar_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                          float* __restrict__ c, int64_t n, int64_t m) {
  for (int64_t row = blockIdx.y; row < n; row += gridDim.y) {
    const float s = __ldg(&a[row]);
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < m; j += (int64_t)gridDim.x * blockDim.x) {
      c[row * m + j] = s * __ldg(&b[row * m + j]);
    }
  }
}

dim3 grid_for(int64_t n, int64_t cols, int threads) {
  int64_t gx = (cols + threads - 1) / threads;
  if (gx > 64) gx = 64;
  if (gx < 1) gx = 1;
  int64_t gy = n < 65535 ? n : 65535;
  if (gy < 1) gy = 1;
  return dim3((unsigned)gx, (unsigned)gy, 1);
}

}  // namespace

// a: (n,), b and c: (n, m) row-major contiguous.
extern "C" cudaError_t diag_matmul_launch(const float* a, const float* b, float* c, int64_t n, int64_t m,
                                          cudaStream_t stream) {
  if (n <= 0 || m <= 0) return cudaSuccess;
  const int threads = 256;
  const bool vec = (m % 4 == 0) && (((reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(c)) & 15) == 0);
  if (vec) {
    diag_matmul_vec4_kernel<<<grid_for(n, m / 4, threads), threads, 0, stream>>>(
        a, reinterpret_cast<const float4*>(b), reinterpret_cast<float4*>(c), n, m / 4);
  } else {
    diag_matmul_scalar_kernel<<<grid_for(n, m, threads), threads, 0, stream>>>(a, b, c, n, m);
  }
  return cudaGetLastError();
}
