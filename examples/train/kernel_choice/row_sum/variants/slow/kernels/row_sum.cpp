// The sum of each row, correct but slow on purpose: one thread, and every row scanned REPEAT times
// through a volatile accumulator, so nothing is vectorised or elided.
#include <cstdint>

constexpr int REPEAT = 1;

extern "C" void row_sum_cpu(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    volatile float acc = 0.0f;
    for (int rep = 0; rep < REPEAT; ++rep) {
      acc = 0.0f;
      for (int64_t c = 0; c < cols; ++c) {
        const float v = row[c];
        acc = acc + v;
      }
    }
    y[r] = acc;
  }
}
