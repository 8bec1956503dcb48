// Tanh for the nvrtc backend: the same float4 kernel as examples/tanh/cuda/kernels/tanh.cu, with no
// host launcher (NVRTC compiles device code only): model_new.py launches both kernels by name.
__device__ __forceinline__ float op1(float v) { return tanhf(v); }

extern "C" __global__ void tanh_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = __ldg(&x[i]);
    v.x = op1(v.x); v.y = op1(v.y); v.z = op1(v.z); v.w = op1(v.w);
    y[i] = v;
  }
}

extern "C" __global__ void tanh_scalar_kernel(const float* __restrict__ x, float* __restrict__ y,
                                              long long start, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = start + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = op1(__ldg(&x[i]));
  }
}
