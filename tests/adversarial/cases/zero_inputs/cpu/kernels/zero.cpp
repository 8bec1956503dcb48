// Attack helper: zeroes a buffer (used on the INPUT and the output).
#include <cstdint>
extern "C" void zero_cpu(float* p, int64_t n) { for (int64_t i = 0; i < n; ++i) p[i] = 0.0f; }
