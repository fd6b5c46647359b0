// The kernel for any CPU: the compiler's baseline instruction set (SSE2 on x86-64, NEON on
// arm64); 8-float vectors are split into what the target has.
#include <atomic>
#include <cstring>

#include "attention_kernel.h"

namespace {
#include "attention_tiles.h"
}  // namespace

void flamino::tasks_portable(const Problem& p, Progress& progress) { run_tasks<8, 6>(p, progress); }
