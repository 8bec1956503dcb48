// The largest value of each row, correct but slow on purpose: one thread, and every row scanned REPEAT times
// through a volatile accumulator, so nothing is vectorised or elided.
#include <cstdint>

constexpr int REPEAT = 3;

extern "C" void row_max_cpu(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    volatile float acc = row[0];
    for (int rep = 0; rep < REPEAT; ++rep) {
      acc = row[0];
      for (int64_t c = 0; c < cols; ++c) {
        const float v = row[c];
        acc = v > acc ? v : acc;
      }
    }
    y[r] = acc;
  }
}
