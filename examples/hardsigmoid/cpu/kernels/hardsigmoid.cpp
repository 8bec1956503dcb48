// HardSigmoid on the CPU: y = min(max(x + 3, 0), 6) / 6, as torch computes it; NaN stays NaN.
// An OpenMP-parallel loop the compiler vectorises; no torch headers here.
#include <cmath>
#include <cstdint>
#include <cstring>

static inline float op1(float v) {
  float t = v + 3.0f;
  t = t < 0.0f ? 0.0f : t;
  t = t > 6.0f ? 6.0f : t;
  return t / 6.0f;
}

extern "C" void hardsigmoid_cpu(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = op1(v);
  }
}
