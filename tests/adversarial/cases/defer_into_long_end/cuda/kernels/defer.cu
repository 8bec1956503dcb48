// ReLU done twice (twice an honest call's work), in kernels that can be called off: each block first
// reads an abort word in host-mapped memory and returns at once if it names the running window; a
// block that did its share counts itself in the call's counter. A finisher, launched at the window's
// end, redoes any call whose blocks did not all run.
#include <cuda_runtime.h>
#include <cstdint>

#define SLOTS 65536

static unsigned int* h_abort = nullptr;  // host side of the abort word (pinned, mapped)
static unsigned int* d_abort = nullptr;  // ... its device address
static unsigned int* d_done = nullptr;   // blocks done, per call slot (a call's index in its window)

static int blocks_for(int64_t n) {
  int blocks = (int)((n + 255) / 256);
  return blocks > 4096 ? 4096 : blocks;
}

__global__ void relu_guarded_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                                    const volatile unsigned int* abort_word, unsigned int gen, unsigned int* done) {
  __shared__ int skip;
  if (threadIdx.x == 0) skip = (*abort_word == gen);
  __syncthreads();
  if (skip) return;  // called off: the window is a long one, this call's work goes to its end
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = x[i] < 0.0f ? 0.0f : x[i];
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(done, 1u);
}

__global__ void relu_finish_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                                   const unsigned int* done, unsigned int expected) {
  if (*done == expected) return;  // every block of both passes ran in its call
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

__global__ void reset_kernel(unsigned int* done, int count) {
  for (int i = threadIdx.x; i < count; i += blockDim.x) done[i] = 0u;
}

extern "C" cudaError_t defer_init() {
  if (h_abort != nullptr) return cudaSuccess;
  cudaError_t err = cudaHostAlloc((void**)&h_abort, 64, cudaHostAllocMapped);
  if (err != cudaSuccess) return err;
  *h_abort = 0u;
  err = cudaHostGetDevicePointer((void**)&d_abort, h_abort, 0);
  if (err != cudaSuccess) return err;
  err = cudaMalloc((void**)&d_done, SLOTS * sizeof(unsigned int));
  if (err != cudaSuccess) return err;
  return cudaMemset(d_done, 0, SLOTS * sizeof(unsigned int));
}

extern "C" void defer_abort(unsigned int gen) {
  __atomic_store_n(h_abort, gen, __ATOMIC_SEQ_CST);  // blocks not yet started see it and return
}

extern "C" cudaError_t relu_twice_guarded(const float* x, float* y, int64_t n, int slot, unsigned int gen,
                                          cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  int s = slot % SLOTS;
  for (int pass = 0; pass < 2; ++pass)  // twice the honest work
    relu_guarded_kernel<<<blocks_for(n), 256, 0, stream>>>(x, y, n, d_abort, gen, d_done + s);
  return cudaGetLastError();
}

extern "C" cudaError_t relu_twice_finish(const float* x, float* y, int64_t n, int slot, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  int s = slot % SLOTS;
  unsigned int expected = 2u * (unsigned int)blocks_for(n);
  for (int pass = 0; pass < 2; ++pass)
    relu_finish_kernel<<<blocks_for(n), 256, 0, stream>>>(x, y, n, d_done + s, expected);
  return cudaGetLastError();
}

extern "C" cudaError_t defer_reset(int count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  reset_kernel<<<1, 256, 0, stream>>>(d_done, count < SLOTS ? count : SLOTS);
  return cudaGetLastError();
}
