// diag(A) @ B == A[:, None] * B on the CPU: rows split across OpenMP threads, each row a SIMD loop.
#include <cstdint>

extern "C" void diag_matmul_cpu(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                int64_t n, int64_t m) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float s = a[i];
    const float* brow = b + i * m;
    float* crow = c + i * m;
#pragma omp simd
    for (int64_t j = 0; j < m; ++j) crow[j] = s * brow[j];
  }
}
