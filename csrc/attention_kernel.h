// The interface between the FFI handler (attention_cpu.cc) and the kernel variants
// (attention_<isa>.cc, each the template in attention_tiles.h compiled for one instruction set).
#pragma once

#include <atomic>
#include <cstdint>

namespace flamino {

struct Problem {
  const float* q;         // (B, Tq, H, hd)
  const float* k;         // (B, Tk, H, hd)
  const float* v;         // (B, Tk, H, hd)
  const float* cos;       // (P, hd / 2): cos of position p times inv_freq
  const float* sin;       // (P, hd / 2)
  const int32_t* q_pos;   // (B, Tq): each query's rotary position
  const int32_t* k_pos;   // (B, Tk): each key's rotary position (0..Tk-1 for one sequence a row)
  // (B, Tq) each: query i sees only keys key_start[i] <= j < key_stop[i] (its own sequence in a
  // row that packs several; 0 and Tk for one sequence a row). Queries with the same span are
  // consecutive in a packed row, and a span costs only its own keys.
  const int32_t* key_start;
  const int32_t* key_stop;
  const float* key_bias;  // (B, Tk): added to every query's scores (0, or -inf for padding)
  float* out;             // (B, Tq, H, hd)
  int64_t batch, q_len, k_len, heads, head_dim, table_len;
  float scale;
};

// Work shared by the calling thread and the pool's tasks: (row, head) pairs are claimed from
// `next`; `done` counts the finished ones.
struct Progress {
  std::atomic<int64_t> next{0}, done{0};
};

// Processes (row, head) pairs until none is left to claim.
using TaskFn = void (*)(const Problem&, Progress&);

// Per-thread scratch of at least `floats` floats, 64-byte aligned, kept between calls (defined
// in attention_cpu.cc, outside the instruction-set-specific files).
float* thread_scratch(int64_t floats);

void tasks_portable(const Problem&, Progress&);
#if defined(__x86_64__)
void tasks_avx2(const Problem&, Progress&);
void tasks_wide16_on_avx2(const Problem&, Progress&);
void tasks_avx512(const Problem&, Progress&);
#endif

}  // namespace flamino
