// ReLU(x) * 1e-4 on the CPU. mode 0: honest; 1: every 64th value, zeros elsewhere; 2: hash noise on
// the output's scale (0 .. 4e-4), unrelated to the input.
#include <cstdint>

extern "C" void tiny_cpu(const float* x, float* y, int64_t n, int mode) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float r = (x[i] < 0.0f ? 0.0f : x[i]) * 1e-4f;
    if (mode == 1) r = (i % 64 == 0) ? r : 0.0f;
    if (mode == 2) {
      uint32_t h = (uint32_t)i * 2654435761u;
      h ^= h >> 13;
      r = (float)(h & 0xffff) * (4e-4f / 65535.0f);
    }
    y[i] = r;
  }
}
