// ReLU on the GPU: one grid-stride kernel.
#include <cuda_runtime.h>
#include <cstdint>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

extern "C" cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  int blocks = (int)((n + 255) / 256);
  if (blocks > 4096) blocks = 4096;
  relu_kernel<<<blocks, 256, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}
