// KernelBench level2/14 on the CPU: sum_j (x @ W^T)[b, j] / 2 * scale = (scale/2) * x[b,:] . wsum
// with wsum = column sums of W. Column sums: each thread owns a range of columns and walks all
// rows (contiguous SIMD adds); then one dot product per row of x. Accumulation in double.
#include <cstdint>
#include <vector>

extern "C" void gemm_divide_sum_scaling_cpu(const float* __restrict__ x, const float* __restrict__ w,
                                            float* __restrict__ y, int64_t batch, int64_t rows, int64_t cols,
                                            double factor) {
  std::vector<double> wsum(cols > 0 ? cols : 1, 0.0);
  double* ws = wsum.data();
  const int64_t chunk = 512;
  const int64_t chunks = (cols + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t k0 = c * chunk, k1 = k0 + chunk < cols ? k0 + chunk : cols;
    for (int64_t r = 0; r < rows; ++r) {
      const float* wr = w + r * cols;
#pragma omp simd
      for (int64_t k = k0; k < k1; ++k) ws[k] += (double)wr[k];
    }
  }
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    const float* xb = x + b * cols;
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (int64_t k = 0; k < cols; ++k) acc += (double)xb[k] * ws[k];
    y[b] = (float)(acc * factor);
  }
}
