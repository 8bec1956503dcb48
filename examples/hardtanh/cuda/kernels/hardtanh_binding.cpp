// Torch-facing side of hardtanh.cu: checks the input, allocates the output, launches on torch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" cudaError_t hardtanh_launch(const float* x, float* y, int64_t n, float min_val, float max_val, cudaStream_t stream);

static torch::Tensor hardtanh_forward(const torch::Tensor& x, double min_val, double max_val) {
  TORCH_CHECK(x.is_cuda(), "hardtanh_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "hardtanh_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "hardtanh_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  cudaError_t err = hardtanh_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(min_val), static_cast<float>(max_val),
                                    c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "hardtanh_launch failed: ", cudaGetErrorString(err));
  return y;
}

static void hardtanh_bind(pybind11::module& m) {
  m.def("hardtanh_forward", &hardtanh_forward, "HardTanh (float4 grid-stride CUDA kernel)");
}

REGISTER_BINDING(hardtanh, hardtanh_bind);
