"""ReLU as a KernelBench single-file solution (level1/19_ReLU): the same kernels as the workspace
twin in ../../cuda, built the KernelBench way with load_inline. kag reads the sources statically
and builds them through its own build path (kag.core.eval.orchestrator.single_file); scored with
`kag score --task examples/kernelbench_sample/level1/19_ReLU.py --solution examples/relu/kernelbench/cuda`.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_cuda_source = r"""
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace {

__device__ __forceinline__ float relu1(float v) { return v < 0.0f ? 0.0f : v; }  // keeps NaN

__global__ void relu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = __ldg(&x[i]);
    v.x = relu1(v.x); v.y = relu1(v.y); v.z = relu1(v.z); v.w = relu1(v.w);
    y[i] = v;
  }
}

__global__ void relu_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = relu1(__ldg(&x[i]));
  }
}

// One thread per float4: measured on an H100 (6.4 GB in, 6.4 GB out) this runs at copy speed
// (4.25 ms, like cudaMemcpy), while capping the grid at one resident wave and striding was 7% slower.
// The grid-stride loop only matters past the cap, which keeps the grid size a valid launch.
int grid_for(int64_t work, int threads) {
  int64_t blocks = (work + threads - 1) / threads;
  const int64_t cap = 1LL << 30;
  if (blocks > cap) blocks = cap;
  return blocks < 1 ? 1 : (int)blocks;
}

}  // namespace

extern "C" cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int threads = 256;
  int64_t done = 0;
  const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  if (aligned) {
    const int64_t n4 = n / 4;
    if (n4 > 0) {
      relu_vec4_kernel<<<grid_for(n4, threads), threads, 0, stream>>>(
          reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4);
    }
    done = n4 * 4;
  }
  if (done < n) {
    relu_scalar_kernel<<<grid_for(n - done, threads), threads, 0, stream>>>(x, y, done, n);
  }
  return cudaGetLastError();
}

torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "relu_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "relu_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = relu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                                c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "relu_launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

relu_cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

relu = load_inline(
    name="relu",
    cpp_sources=relu_cpp_source,
    cuda_sources=relu_cuda_source,
    functions=["relu_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu.relu_forward(x)
