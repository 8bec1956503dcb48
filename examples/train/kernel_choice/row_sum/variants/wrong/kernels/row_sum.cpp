// The sum of each row, wrong: the loop bound stops at half the row (a bound copied from a
// two-accumulator version), so the answer misses every value in the second half.
#include <cstdint>

extern "C" void row_sum_cpu(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    float acc = 0.0f;
    for (int64_t c = 0; c < cols / 2; ++c) {
      const float v = row[c];
      acc = acc + v;
    }
    y[r] = acc;
  }
}
