// A kernel that does nothing for a given number of nanoseconds (the GPU's global timer).
#include <cuda_runtime.h>
#include <cstdint>

__global__ void spin_kernel(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

extern "C" cudaError_t spin_launch(uint64_t ns, cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}
