// Row log-softmax of a (rows, cols) matrix, one 1024-thread block per row. Pass 1 reads the row once
// with an online max/sum (each thread keeps a running max m and sum s of exp(x - m), rescaling s
// when m grows), then one block reduction of the (m, s) pairs; pass 2 reads the row again and
// writes (x - m) - log s (x - m is exact near the max, as in torch). Two reads and one write per
// element, float4 when the row allows it.
#include <cuda_runtime.h>
#include <cstdint>
#include <cfloat>

namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
  if (m2 > m) { s = s * expf(m - m2) + s2; m = m2; }
  else if (m2 != -FLT_MAX) { s += s2 * expf(m2 - m); }
}

__device__ __forceinline__ void push(float& m, float& s, float v) {
  if (v > m) { s = s * expf(m - v) + 1.0f; m = v; }
  else { s += expf(v - m); }
}

// Reduces (m, s) over the block; every thread gets the row's max and sum.
__device__ void block_reduce(float& m, float& s) {
  __shared__ float sm[kThreads / 32], ss[kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) {
    float m2 = __shfl_xor_sync(0xffffffffu, m, off);
    float s2 = __shfl_xor_sync(0xffffffffu, s, off);
    combine(m, s, m2, s2);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) { sm[warp] = m; ss[warp] = s; }
  __syncthreads();
  if (warp == 0) {
    m = lane < (int)(blockDim.x / 32) ? sm[lane] : -FLT_MAX;
    s = lane < (int)(blockDim.x / 32) ? ss[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) {
      float m2 = __shfl_xor_sync(0xffffffffu, m, off);
      float s2 = __shfl_xor_sync(0xffffffffu, s, off);
      combine(m, s, m2, s2);
    }
    if (lane == 0) { sm[0] = m; ss[0] = s; }
  }
  __syncthreads();
  m = sm[0]; s = ss[0];
  __syncthreads();  // sm/ss are reused by the next row of a grid-stride loop
}

__global__ void log_softmax_vec4_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  const int64_t c4 = cols / 4;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float4* xr = reinterpret_cast<const float4*>(x + r * cols);
    float4* yr = reinterpret_cast<float4*>(y + r * cols);
    float m = -FLT_MAX, s = 0.0f;
    for (int64_t j = threadIdx.x; j < c4; j += blockDim.x) {
      const float4 v = __ldg(&xr[j]);
      push(m, s, v.x); push(m, s, v.y); push(m, s, v.z); push(m, s, v.w);
    }
    block_reduce(m, s);
    const float log_s = logf(s);
    for (int64_t j = threadIdx.x; j < c4; j += blockDim.x) {
      float4 v = __ldg(&xr[j]);
      v.x = (v.x - m) - log_s; v.y = (v.y - m) - log_s; v.z = (v.z - m) - log_s; v.w = (v.w - m) - log_s;
      yr[j] = v;
    }
  }
}

__global__ void log_softmax_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float m = -FLT_MAX, s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) push(m, s, __ldg(&xr[j]));
    block_reduce(m, s);
    const float log_s = logf(s);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = (__ldg(&xr[j]) - m) - log_s;
  }
}

}  // namespace

// x, y: (rows, cols) row-major contiguous; log-softmax along cols.
extern "C" cudaError_t log_softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const unsigned grid = (unsigned)(rows < 1048576 ? rows : 1048576);
  const bool vec = (cols % 4 == 0) && (((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0);
  if (vec) log_softmax_vec4_kernel<<<grid, kThreads, 0, stream>>>(x, y, rows, cols);
  else log_softmax_scalar_kernel<<<grid, kThreads, 0, stream>>>(x, y, rows, cols);
  return cudaGetLastError();
}
