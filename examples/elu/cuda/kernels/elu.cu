// ELU: y = x if x > 0 else alpha * (exp(x) - 1).
// Memory-bound, so the kernel moves 16 bytes per load/store (float4) (one per thread, grid-stride
// only past the launch cap); a scalar kernel takes the tail.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

__device__ __forceinline__ float op1(float v, float alpha) {
  return v > 0.0f ? v : alpha * expm1f(v);
}

__global__ void elu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4, float alpha) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = __ldg(&x[i]);
    v.x = op1(v.x, alpha); v.y = op1(v.y, alpha); v.z = op1(v.z, alpha); v.w = op1(v.w, alpha);
    y[i] = v;
  }
}

__global__ void elu_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n, float alpha) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = op1(__ldg(&x[i]), alpha);
  }
}

// One thread per float4: for relu on an H100 (6.4 GB in, 6.4 GB out) this ran at copy speed
// (4.25 ms, like cudaMemcpy), while capping the grid at one resident wave and striding was 7% slower.
// The grid-stride loop only matters past the cap, which keeps the grid size a valid launch.
int grid_for(int64_t work, int threads) {
  int64_t blocks = (work + threads - 1) / threads;
  const int64_t cap = 1LL << 30;
  if (blocks > cap) blocks = cap;
  return blocks < 1 ? 1 : (int)blocks;
}

}  // namespace

extern "C" cudaError_t elu_launch(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int threads = 256;
  int64_t done = 0;
  const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  if (aligned) {
    const int64_t n4 = n / 4;
    if (n4 > 0) {
      elu_vec4_kernel<<<grid_for(n4, threads), threads, 0, stream>>>(
          reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4, alpha);
    }
    done = n4 * 4;
  }
  if (done < n) {
    elu_scalar_kernel<<<grid_for(n - done, threads), threads, 0, stream>>>(x, y, done, n, alpha);
  }
  return cudaGetLastError();
}
