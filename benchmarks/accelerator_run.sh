#!/bin/bash
# One session on an accelerator host (after benchmarks/accelerator_host.sh, or pip install -e '.[tpu,test]'):
# the accelerator parity tests in JAX's default fp32 products ("highest"), the ESM-2 forward ones
# again at "high" (bf16_3x: does it hold 1e-4?), then benchmarks/accelerator.py. Results under
# OUT (default benchmarks/results). SHAPES / BIG_SHAPES name what to time; the big shapes run one
# at a time in their own process, killed above RSS_LIMIT_KB of host memory (a host's RAM, not the
# chip's: loading 3B stages its 11 GB on the host; its process reached 29.7 GB on a 40 GB v5e host
# and was stopped there by the old 28 GB limit, before it finished: where it peaks is unmeasured) rather than taking the machine down.
set -o pipefail
OUT=${OUT:-benchmarks/results}; mkdir -p "$OUT"
# Each step runs in the background, watched: killed when the host's available memory falls under
# MIN_AVAILABLE_KB (a host killed for memory returns nothing), the largest processes then listed.
guarded() {
  "$@" & local pid=$!
  while kill -0 $pid 2>/dev/null; do
    local free_kb; free_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
    if [ "${free_kb:-0}" -lt "${MIN_AVAILABLE_KB:-6000000}" ]; then
      echo "killed '$*': host memory available ${free_kb} KB"; ps -eo rss,args --sort=-rss | head -4 | cut -c1-160
      pkill -9 -P $pid; kill -9 $pid
    fi
    sleep 1
  done
  wait $pid
}
export FLAMINO_TEST_EDITING=1 PYTHONUNBUFFERED=1
tests="tests/parity/test_accelerator_parity.py tests/parity/test_accelerator_saprot.py tests/parity/test_accelerator_batch_invariance.py tests/integration/test_device_memory.py"
guarded timeout "${PARITY_S:-240}" python3 -m pytest -v -p no:cacheprovider ${PARITY_K:+-k "$PARITY_K"} $tests -rs \
  > "$OUT/parity_highest.log" 2>&1; grep -E "PASS|FAIL|ERROR|SKIP|passed|failed|Error" "$OUT/parity_highest.log" | tail -40
FLAMINO_MATMUL_PRECISION=high guarded timeout "${HIGH_S:-70}" python3 -m pytest -v -p no:cacheprovider \
  tests/parity/test_accelerator_parity.py -k "forward_matches_hf or esmc_matches" > "$OUT/parity_high.log" 2>&1
grep -E "PASS|FAIL|passed|failed|error [0-9]" "$OUT/parity_high.log" | tail -14
guarded timeout "${BENCH_S:-150}" python3 benchmarks/accelerator.py --shapes "${SHAPES:-t33,t48}" --modes fp32,bf16 \
  --scan-shapes "${SCAN_SHAPES:-}" --extras "${EXTRAS:-}" --out "$OUT/accelerator.jsonl" 2>&1 | tail -6
for shape in ${BIG_SHAPES:-}; do  # e.g. BIG_SHAPES=t36
  python3 benchmarks/accelerator.py --shapes "$shape" --modes "${BIG_MODES:-fp32}" \
    --scan-shapes "" --out "$OUT/accelerator.jsonl" > "$OUT/$shape.log" 2>&1 & pid=$!
  peak=0; waited=0
  while kill -0 $pid 2>/dev/null; do
    rss=$(ps -o rss= -p $pid 2>/dev/null | tr -d ' '); rss=${rss:-0}; [ "$rss" -gt "$peak" ] && peak=$rss
    if [ "$rss" -gt "${RSS_LIMIT_KB:-36000000}" ]; then kill -9 $pid; echo "$shape: killed at host RSS ${rss} KB"; fi
    if [ "$waited" -gt "${BIG_S:-110}" ]; then kill -9 $pid; echo "$shape: killed after ${waited} s"; fi
    sleep 1; waited=$((waited + 1))
  done
  wait $pid; echo "$shape: exit $?, peak host RSS ${peak} KB"; tail -3 "$OUT/$shape.log"
done
