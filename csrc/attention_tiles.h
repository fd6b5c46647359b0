// The fused attention kernel as one template over the vector width W and the number R of
// queries per register block. Included by attention_<isa>.cc, each compiled for one instruction
// set (a `#pragma GCC target` before the #include), inside an anonymous namespace so that each
// file keeps its own copy. It uses no standard-library templates: one instantiated under a
// target pragma would be emitted as a weak symbol the linker may share with the portable file,
// and run AVX2 code on a CPU without it.
//
// Arithmetic per (row b, head h), the pure-JAX path's (model.py `_attend_heads`):
//   q' = rotary(q * scale), k' = rotary(k), s = q' k'^T + key_bias (-inf outside each query's
//   key span: a row may pack several sequences, each attending only to itself),
//   out = (exp(s - max) v) / sum(exp(s - max)),
// with the max and sum kept online over blocks of kKeyBlock keys (flash-attention style:
// when a block raises a query's max, its partial sum and output are rescaled), so a block of
// scores stays in L1 at any length. Only the summation order differs from XLA's (fp32
// rounding, ~1e-7 relative).

#include <cstring>

#include "attention_kernel.h"

#define FLAMINO_INLINE inline __attribute__((always_inline))

using flamino::Problem;
using flamino::Progress;

constexpr float kNegInf = -__builtin_inff();

// Keys per block of the online softmax. A block's scores for one query block (R x kKeyBlock
// floats: 6 KiB for AVX2, 12 KiB for AVX-512) stay in L1; K and V of one (row, head), at most
// 2 x 1024 x 128 floats, stay in L2 while every query block reads them.
constexpr int64_t kKeyBlock = 256;

// --- vectors (GCC / Clang vector extensions) -------------------------------------------------
typedef float f8 __attribute__((vector_size(32)));
typedef float f16 __attribute__((vector_size(64)));
typedef int32_t i8 __attribute__((vector_size(32)));
typedef int32_t i16 __attribute__((vector_size(64)));

template <int W> struct Vec;
template <> struct Vec<8> { using F = f8; using I = i8; };
template <> struct Vec<16> { using F = f16; using I = i16; };

template <class F> FLAMINO_INLINE F load(const float* p) { F v; std::memcpy(&v, p, sizeof v); return v; }
template <class F> FLAMINO_INLINE void store(float* p, F v) { std::memcpy(p, &v, sizeof v); }
// Broadcasts as initialiser lists, which the compiler turns into one broadcast instruction.
template <class F> FLAMINO_INLINE F splat(float s);
template <> FLAMINO_INLINE f8 splat<f8>(float s) { return f8{s, s, s, s, s, s, s, s}; }
template <> FLAMINO_INLINE f16 splat<f16>(float s) {
  return f16{s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s};
}
template <class F, class I> FLAMINO_INLINE F select(I mask, F a, F b) {
  return (F)(((I)a & mask) | ((I)b & ~mask));
}
template <class F, class I> FLAMINO_INLINE F vmax(F a, F b) { return select<F, I>(a > b, a, b); }
template <class F, int W> FLAMINO_INLINE float hmax(F v) {
  float m = v[0];
  for (int i = 1; i < W; ++i) m = v[i] > m ? v[i] : m;
  return m;
}
template <class F, int W> FLAMINO_INLINE float hsum(F v) {
  float s = 0.0f;
  for (int i = 0; i < W; ++i) s += v[i];
  return s;
}
FLAMINO_INLINE int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
FLAMINO_INLINE int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }
FLAMINO_INLINE int64_t clamp_position(int64_t pos, int64_t table_len) {
  return pos < 0 ? 0 : (pos >= table_len ? table_len - 1 : pos);
}
FLAMINO_INLINE void fill(float* p, int64_t n, float value) {
  for (int64_t i = 0; i < n; ++i) p[i] = value;
}

// exp(x) for x <= 0 (the kernel only takes exp of s - max and of old max - new max), Cephes'
// expf: x = n ln2 + r with |r| <= ln2 / 2, exp(r) by its degree-6 polynomial (about 1 ulp),
// times 2^n built in the exponent bits. Below -87.34 (2^-126) it gives exactly 0, as exp(-inf)
// must for masked keys. Needs IEEE rounding: never compile with -ffast-math.
template <class F, class I> FLAMINO_INLINE F exp_nonpositive(F x) {
  const F magic = splat<F>(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const F t = x * 1.44269504088896341f + magic;
  const F n = t - magic;  // round(x / ln2)
  F r = x - n * 0.693359375f;  // ln2 in two parts (Cephes C1, C2) keeps r exact
  r = r - n * -2.12194440e-4f;
  F p = splat<F>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const F y = p * (r * r) + r + 1.0f;
  const I two_n = (((I)t - (I)magic) + 127) << 23;
  const I in_range = x >= splat<F>(-87.336544f);
  return (F)((I)(y * (F)two_n) & in_range);
}

// Rotary exactly as the references: x * cos + rotate_half(x) * sin with rotate_half(x) =
// [-x2, x1], written per half ([x1 cos - x2 sin, x2 cos + x1 sin], as model.py).
FLAMINO_INLINE void rotate_into(const float* x, const float* cos, const float* sin, int64_t half,
                                float factor, float* out, int64_t out_stride) {
  for (int64_t d = 0; d < half; ++d) {
    const float x1 = x[d] * factor, x2 = x[d + half] * factor;
    out[d * out_stride] = x1 * cos[d] - x2 * sin[d];
    out[(d + half) * out_stride] = x2 * cos[d] + x1 * sin[d];
  }
}

// Scores of R queries against 2W keys: s[r, j] = sum_d q[r, d] kt[d, j] + bias[j].
template <int W, int R>
FLAMINO_INLINE void score_tile(const float* q, int64_t hd, const float* kt, int64_t ldk,
                               const float* bias, float* s, int64_t lds) {
  using F = typename Vec<W>::F;
  F acc[R][2];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = F{};
  for (int64_t d = 0; d < hd; ++d) {
    const F k0 = load<F>(kt + d * ldk), k1 = load<F>(kt + d * ldk + W);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const F qd = splat<F>(q[r * hd + d]);
      acc[r][0] += qd * k0;
      acc[r][1] += qd * k1;
    }
  }
  const F b0 = load<F>(bias), b1 = load<F>(bias + W);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    store(s + r * lds, acc[r][0] + b0);
    store(s + r * lds + W, acc[r][1] + b1);
  }
}

// acc[r, c0 : c0 + 8C] += sum_j p[r, j] v[j, c0 : c0 + 8C] over n keys (8-float vectors: every
// ESM-2 head dimension is a multiple of 8, not all of 16).
template <int R, int C>
FLAMINO_INLINE void value_tile(const float* p, int64_t ldp, const float* v, int64_t hd, int64_t n,
                               float* acc, int64_t c0) {
  f8 a[R][C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) a[r][c] = load<f8>(acc + r * hd + c0 + 8 * c);
  for (int64_t j = 0; j < n; ++j) {
    f8 vj[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) vj[c] = load<f8>(v + j * hd + c0 + 8 * c);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const f8 pr = splat<f8>(p[r * ldp + j]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) a[r][c] += pr * vj[c];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) store(acc + r * hd + c0 + 8 * c, a[r][c]);
}

// Scratch of one (row, head), carved from the thread's buffer.
struct Scratch {
  float *kt, *v, *bias, *q, *scores, *acc, *m, *l;
};

// Queries i0 .. i0 + rows - 1 (rows <= R) of (row b, head h), which share the key span
// [lo, hi) (0 <= lo < hi <= the prepared keys), against those keys. Key blocks start at lo
// rounded down to a whole tile and end at hi rounded up (within the prepared, zero-padded
// keys); the scores of keys outside the span in those edge tiles are set to -inf.
template <int W, int R>
FLAMINO_INLINE void query_block(const Problem& p, const Scratch& w, int64_t b, int64_t h, int64_t i0,
                                int64_t rows, int64_t lo, int64_t hi, int64_t n_keys) {
  using F = typename Vec<W>::F;
  using I = typename Vec<W>::I;
  const int64_t hd = p.head_dim, half = hd / 2, token_stride = p.heads * hd;
  float *q = w.q, *s = w.scores, *acc = w.acc, *m = w.m, *l = w.l;
  for (int r = 0; r < R; ++r) {
    m[r] = kNegInf;
    l[r] = 0.0f;
    if (r >= rows) {  // the last block of a row: filler queries (zeros), computed, not written
      fill(q + r * hd, hd, 0.0f);
      continue;
    }
    const int64_t i = b * p.q_len + i0 + r;
    const int64_t pos = clamp_position(p.q_pos[i], p.table_len);
    // q is scaled before rotary, as in both references.
    rotate_into(p.q + i * token_stride + h * hd, p.cos + pos * half, p.sin + pos * half, half,
                p.scale, q + r * hd, 1);
  }
  fill(acc, R * hd, 0.0f);
  const int64_t begin = lo / (2 * W) * (2 * W), end = round_up(hi, 2 * W);  // end <= n_keys
  for (int64_t j0 = begin; j0 < end; j0 += kKeyBlock) {
    const int64_t n = min64(kKeyBlock, end - j0);  // a multiple of 2W
    for (int64_t jj = 0; jj < n; jj += 2 * W)
      score_tile<W, R>(q, hd, w.kt + j0 + jj, n_keys, w.bias + j0 + jj, s + jj, kKeyBlock);
    // Keys of the edge tiles outside the span (another sequence of a packed row): masked.
    const int64_t masked_before = min64(lo > j0 ? lo - j0 : 0, n);
    const int64_t kept_to = hi - j0 < n ? (hi > j0 ? hi - j0 : 0) : n;
    for (int r = 0; r < R; ++r) {
      float* sr = s + r * kKeyBlock;
      fill(sr, masked_before, kNegInf);
      fill(sr + kept_to, n - kept_to, kNegInf);
      F mx = load<F>(sr);
      for (int64_t j = W; j < n; j += W) mx = vmax<F, I>(mx, load<F>(sr + j));
      const float block_max = hmax<F, W>(mx);
      const float m_new = block_max > m[r] ? block_max : m[r];
      // A query whose keys so far are all masked keeps max -inf; subtracting 0 instead keeps
      // exp(-inf - max) at 0 rather than NaN.
      const float m_use = m_new == kNegInf ? 0.0f : m_new;
      const float alpha = exp_nonpositive<F, I>(splat<F>(m[r] - m_use))[0];
      F sum = F{};
      const F mv = splat<F>(m_use);
      for (int64_t j = 0; j < n; j += W) {
        const F e = exp_nonpositive<F, I>(load<F>(sr + j) - mv);
        store(sr + j, e);
        sum += e;
      }
      l[r] = l[r] * alpha + hsum<F, W>(sum);
      m[r] = m_new;
      if (alpha != 1.0f)
        for (int64_t d = 0; d < hd; ++d) acc[r * hd + d] *= alpha;
    }
    const float* v = w.v + j0 * hd;
    int64_t c0 = 0;
    for (; c0 + 16 <= hd; c0 += 16) value_tile<R, 2>(s, kKeyBlock, v, hd, n, acc, c0);
    if (c0 < hd) value_tile<R, 1>(s, kKeyBlock, v, hd, n, acc, c0);
  }
  for (int r = 0; r < rows; ++r) {
    float* o = p.out + (b * p.q_len + i0 + r) * token_stride + h * hd;
    // The pure-JAX path divides the weighted sum by the sum of weights: the same division.
    for (int64_t d = 0; d < hd; ++d) o[d] = acc[r * hd + d] / l[r];
  }
}

// All queries of row b, head h.
template <int W, int R>
FLAMINO_INLINE void row_head(const Problem& p, int64_t b, int64_t h) {
  const int64_t hd = p.head_dim, half = hd / 2, token_stride = p.heads * hd;
  const float* bias = p.key_bias + b * p.k_len;
  // Keys after the last unmasked one (right padding) contribute exp(-inf) = 0: skip them.
  int64_t valid = p.k_len;
  while (valid > 0 && bias[valid - 1] == kNegInf) --valid;
  if (valid == 0) {  // no key to attend to: NaN, as a softmax over only -inf gives in JAX
    for (int64_t i = 0; i < p.q_len; ++i)
      fill(p.out + (b * p.q_len + i) * token_stride + h * hd, hd, __builtin_nanf(""));
    return;
  }
  const int64_t n_keys = round_up(valid, 2 * W);
  // One buffer, each piece 64-byte aligned: K^T (hd x n_keys), V (n_keys x hd), the bias, the
  // rotated query block, its scores, partial outputs, maxima and sums.
  const int64_t sizes[8] = {hd * n_keys, n_keys * hd, n_keys, R * hd, R * kKeyBlock, R * hd, R, R};
  int64_t total = 0;
  for (int64_t size : sizes) total += round_up(size, 16);
  float* base = flamino::thread_scratch(total);
  float* piece[8];
  for (int i = 0; i < 8; ++i) {
    piece[i] = base;
    base += round_up(sizes[i], 16);
  }
  const Scratch w{piece[0], piece[1], piece[2], piece[3], piece[4], piece[5], piece[6], piece[7]};
  for (int64_t j = 0; j < valid; ++j) {
    const int64_t at = (b * p.k_len + j) * token_stride + h * hd;
    const int64_t pos = clamp_position(p.k_pos[b * p.k_len + j], p.table_len);
    rotate_into(p.k + at, p.cos + pos * half, p.sin + pos * half, half, 1.0f, w.kt + j, n_keys);
    std::memcpy(w.v + j * hd, p.v + at, hd * sizeof(float));
    w.bias[j] = bias[j];
  }
  // Filler keys up to a whole tile: zero K and V (finite, so weight 0 x V is 0), -inf bias.
  for (int64_t j = valid; j < n_keys; ++j) {
    for (int64_t d = 0; d < hd; ++d) w.kt[d * n_keys + j] = 0.0f;
    fill(w.v + j * hd, hd, 0.0f);
    w.bias[j] = kNegInf;
  }
  // Queries in runs that share a key span (one run for a row holding one sequence; one per
  // sequence in a packed row), so that a register block never mixes two spans.
  const int32_t* span_start = p.key_start + b * p.q_len;
  const int32_t* span_stop = p.key_stop + b * p.q_len;
  for (int64_t i0 = 0, i1; i0 < p.q_len; i0 = i1) {
    for (i1 = i0 + 1; i1 < p.q_len && span_start[i1] == span_start[i0] && span_stop[i1] == span_stop[i0];) ++i1;
    const int64_t lo = span_start[i0] < 0 ? 0 : span_start[i0];
    const int64_t hi = min64(span_stop[i0], valid);
    if (lo >= hi) {  // nothing unmasked in the span: NaN, as in JAX
      for (int64_t i = i0; i < i1; ++i)
        fill(p.out + (b * p.q_len + i) * token_stride + h * hd, hd, __builtin_nanf(""));
      continue;
    }
    for (int64_t i = i0; i < i1; i += R) query_block<W, R>(p, w, b, h, i, min64(R, i1 - i), lo, hi, n_keys);
  }
}

template <int W, int R>
FLAMINO_INLINE void run_tasks(const Problem& p, Progress& progress) {
  const int64_t tasks = p.batch * p.heads;
  for (int64_t t; (t = progress.next.fetch_add(1, std::memory_order_relaxed)) < tasks;) {
    row_head<W, R>(p, t / p.heads, t % p.heads);
    progress.done.fetch_add(1, std::memory_order_release);
  }
}
