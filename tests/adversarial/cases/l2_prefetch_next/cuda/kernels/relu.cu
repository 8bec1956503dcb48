// ReLU, and a kernel that only reads a tensor so that it sits in the L2 cache afterwards.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float4* x, float4* y, int64_t n4) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 v = x[i];
    v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
    y[i] = v;
  }
}

__global__ void touch_kernel(const float4* x, int64_t n4, float* sink) {
  float acc = 0.f;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = x[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1234.5f) sink[0] = acc;  // never true in practice: keeps the loads
}

extern "C" void relu_cuda(const float* x, float* y, int64_t n, cudaStream_t stream) {
  int64_t n4 = n / 4;
  relu_kernel<<<(unsigned)((n4 + 255) / 256), 256, 0, stream>>>(
      reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4);
}

extern "C" void touch_cuda(const float* x, int64_t n, float* sink, cudaStream_t stream) {
  touch_kernel<<<264, 256, 0, stream>>>(reinterpret_cast<const float4*>(x), n / 4, sink);
}
