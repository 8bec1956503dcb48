// HardTanh on the CPU: y = clamp(x, min_val, max_val) (the task fixes min_val=-1, max_val=1); NaN stays NaN.
// An OpenMP-parallel loop the compiler vectorises; no torch headers here.
#include <cmath>
#include <cstdint>
#include <cstring>

extern "C" void hardtanh_cpu(const float* __restrict__ x, float* __restrict__ y, int64_t n, float min_val, float max_val) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v < min_val ? min_val : (v > max_val ? max_val : v);
  }
}
