// The kernel for AVX-512 (F, VL, DQ): 16-float vectors, 32 registers, so 12 queries per
// register block (12 x 2 score accumulators).
#include <atomic>
#include <cstring>

#include "attention_kernel.h"

#if defined(__x86_64__)
// Everything below is compiled for AVX-512 (only called when the CPU has it).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma"))), apply_to = function)
#else
#pragma GCC target("avx512f,avx512vl,avx512dq,avx2,fma")
#endif

namespace {
#include "attention_tiles.h"
}  // namespace

void flamino::tasks_avx512(const Problem& p, Progress& progress) { run_tasks<16, 12>(p, progress); }

#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
