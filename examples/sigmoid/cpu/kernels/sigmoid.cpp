// Sigmoid on the CPU (y = 1 / (1 + exp(-x))): an OpenMP-parallel loop, no torch headers here.
#include <cmath>
#include <cstdint>
#include <cstring>

// exp(x) the compiler can vectorise (libm's expf is a scalar call without -ffast-math): split
// x = k*ln2 + r with |r| <= ln2/2 (Cody-Waite, two-part ln2), exp(r) by its degree-6 Taylor
// polynomial (relative error ~2e-7), and 2^k built directly in the exponent bits.
static inline float fast_exp(float x) {
  const float t = x * 1.44269504088896341f;
  // k = round(x / ln2) by truncation of t +- 0.5
  // (std::floor and float compares block vectorisation without -ffast-math); x stays finite here
  int32_t ki = static_cast<int32_t>(t + std::copysign(0.5f, t));
  const float k = static_cast<float>(ki);  // r below uses the unclamped k: |r| <= ln2/2 always
  float r = x - k * 0.693145751953125f;
  r = r - k * 1.428606765330187e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // clamp in integers so 2^k stays a normal float (x beyond about +-87 saturates to 2^127 or 2^-126)
  ki = ki > 127 ? 127 : ki;
  ki = ki < -126 ? -126 : ki;
  const int32_t bits = (ki + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

extern "C" void sigmoid_cpu(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 1.0f / (1.0f + fast_exp(-v));
  }
}
