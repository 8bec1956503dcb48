// LeakyReLU on the CPU (y = x if x > 0 else x * negative_slope): an OpenMP-parallel loop, no torch headers here.
#include <cmath>
#include <cstdint>
#include <cstring>

extern "C" void leaky_relu_cpu(const float* __restrict__ x, float* __restrict__ y, int64_t n, float negative_slope) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : v * negative_slope;
  }
}
