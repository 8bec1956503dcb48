// Matrix-scalar multiplication on the CPU: C = A * s for a float32 matrix A and a Python float s.
// An OpenMP-parallel loop the compiler vectorises; no torch headers here.
#include <cmath>
#include <cstdint>
#include <cstring>

extern "C" void matrix_scalar_cpu(const float* __restrict__ x, float* __restrict__ y, int64_t n, float s) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v * s;
  }
}
