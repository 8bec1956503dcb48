// ReLU(x) * 1e-4 on the GPU. mode 0: honest; 1: every 64th value, zeros elsewhere; 2: hash noise on
// the output's scale (0 .. 4e-4), unrelated to the input.
#include <cuda_runtime.h>
#include <cstdint>

__global__ void tiny_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, int mode) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float r = (x[i] < 0.f ? 0.f : x[i]) * 1e-4f;
    if (mode == 1) r = (i % 64 == 0) ? r : 0.f;
    if (mode == 2) {
      uint32_t h = (uint32_t)i * 2654435761u;
      h ^= h >> 13;
      r = (float)(h & 0xffff) * (4e-4f / 65535.f);
    }
    y[i] = r;
  }
}

extern "C" cudaError_t tiny_launch(const float* x, float* y, int64_t n, int mode, cudaStream_t s) {
  int64_t blocks = (n + 255) / 256;
  if (blocks > 1048576) blocks = 1048576;
  if (blocks < 1) blocks = 1;
  tiny_kernel<<<(int)blocks, 256, 0, s>>>(x, y, n, mode);
  return cudaGetLastError();
}
