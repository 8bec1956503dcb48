// Min over one dimension on the CPU (torch.min(x, dim)[0], the dim removed) for a contiguous tensor
// viewed as (outer, reduce, inner); NaN propagates like torch.min.
// inner > 1: for each outer slice, fold the reduce rows of length inner into the output row
// (contiguous SIMD work, outer slices and inner chunks split across threads).
// inner == 1: a reduction per output.
#include <cmath>
#include <cstdint>

static inline float combine(float a, float b) { return (b < a || b != b) ? b : a; }

extern "C" void min_reduction_cpu(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t reduce,
                                  int64_t inner) {
  if (inner == 1) {
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
      const float* p = x + o * reduce;
      float acc = INFINITY;
      for (int64_t r = 0; r < reduce; ++r) acc = combine(acc, p[r]);
      y[o] = acc;
    }
    return;
  }
  const int64_t chunk = 1024;  // output columns per task: the accumulator row stays in L1
  const int64_t chunks = (inner + chunk - 1) / chunk;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t i0 = c * chunk, i1 = i0 + chunk < inner ? i0 + chunk : inner;
      float* out = y + o * inner;
      const float* base = x + o * reduce * inner;
#pragma omp simd
      for (int64_t i = i0; i < i1; ++i) out[i] = INFINITY;
      for (int64_t r = 0; r < reduce; ++r) {
        const float* row = base + r * inner;
#pragma omp simd
        for (int64_t i = i0; i < i1; ++i) out[i] = combine(out[i], row[i]);
      }
    }
  }
}
