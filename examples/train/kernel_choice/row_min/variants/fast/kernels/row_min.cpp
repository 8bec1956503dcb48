// The smallest value of each row in one pass: rows in parallel (OpenMP), each row vectorised.
#include <cstdint>

extern "C" void row_min_cpu(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    float acc = row[0];
#pragma omp simd reduction(min:acc)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = row[c];
      acc = v < acc ? v : acc;
    }
    y[r] = acc;
  }
}
