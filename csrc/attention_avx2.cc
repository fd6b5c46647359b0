// The kernel for AVX2 + FMA (x86-64 since about 2013): 8-float vectors, 16 registers, so 6
// queries per register block (6 x 2 score accumulators, 2 key vectors, 1 broadcast).
#include <atomic>
#include <cstring>

#include "attention_kernel.h"

#if defined(__x86_64__)
// Everything below is compiled for AVX2 + FMA (only called when the CPU has them).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC target("avx2,fma")
#endif

namespace {
#include "attention_tiles.h"
}  // namespace

void flamino::tasks_avx2(const Problem& p, Progress& progress) { run_tasks<8, 6>(p, progress); }

// The AVX-512 variant's template arguments (16-float vectors, 12-query blocks) built for AVX2,
// so that a CPU without AVX-512 can test that arithmetic (tests/parity/test_fused_attention.py). Slow.
void flamino::tasks_wide16_on_avx2(const Problem& p, Progress& progress) { run_tasks<16, 12>(p, progress); }

#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
