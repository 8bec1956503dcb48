// ReLU on the GPU: the honest path the attack avoids or mixes in.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

extern "C" void relu_cuda(const float* x, float* y, int64_t n, cudaStream_t stream) {
  relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);
}
