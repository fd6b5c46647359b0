// The XLA FFI handler of flamino's fused attention and the Python module that hands it to JAX
// (flamino_core/fused_attention.py). One call computes, for every row b and head h,
//
//   softmax(rotary(q * scale) rotary(k)^T + key_bias) v
//
// on q, k, v in the (B, T, H, hd) layout the projections produce, writing the same layout, so
// the model needs no head transposes. Each query and key has its own rotary position, and each
// query a span of keys it may see, so one row can pack several sequences (block-diagonal
// attention, positions restarting at 0 for each). The arithmetic is in attention_tiles.h; this file picks
// the instruction-set variant at run time and shares the (row, head) pairs out over XLA's
// intra-op thread pool, which the FFI hands to the handler. The calling thread works too and
// only waits for pairs already started, so a busy or single-thread pool cannot deadlock it.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "attention_kernel.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using flamino::Problem;
using flamino::Progress;
using flamino::TaskFn;

float* flamino::thread_scratch(int64_t floats) {
  struct Buffer {
    float* data = nullptr;
    int64_t size = 0;
    ~Buffer() { std::free(data); }
  };
  static thread_local Buffer buffer;
  if (buffer.size < floats) {
    std::free(buffer.data);
    buffer.data = static_cast<float*>(std::aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64));
    buffer.size = buffer.data ? floats : 0;
    if (!buffer.data) throw std::bad_alloc();
  }
  return buffer.data;
}

namespace {

// The variants, each attention_tiles.h compiled for one instruction set.
enum Variant : int32_t { kAuto = 0, kPortable = 1, kAvx2 = 2, kAvx512 = 3, kWide16OnAvx2 = 4 };

bool cpu_has(Variant v) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  switch (v) {
    case kAvx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq");
    case kAvx2:
    case kWide16OnAvx2:
      return avx2;
    default:
      return v == kPortable;
  }
#else
  return v == kPortable;
#endif
}

Variant best_variant() {
  for (Variant v : {kAvx512, kAvx2})
    if (cpu_has(v)) return v;
  return kPortable;
}

TaskFn task_fn(Variant v) {
  switch (v) {
#if defined(__x86_64__)
    case kAvx512: return flamino::tasks_avx512;
    case kAvx2: return flamino::tasks_avx2;
    case kWide16OnAvx2: return flamino::tasks_wide16_on_avx2;
#endif
    default: return flamino::tasks_portable;
  }
}

const char* variant_name(Variant v) {
  switch (v) {
    case kAvx512: return "avx512";
    case kAvx2: return "avx2";
    case kWide16OnAvx2: return "wide16-on-avx2";
    default: return "portable";
  }
}

ffi::Error attention(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> q, ffi::Buffer<ffi::F32> k,
                     ffi::Buffer<ffi::F32> v, ffi::Buffer<ffi::F32> cos, ffi::Buffer<ffi::F32> sin,
                     ffi::Buffer<ffi::S32> q_pos, ffi::Buffer<ffi::S32> k_pos, ffi::Buffer<ffi::S32> key_start,
                     ffi::Buffer<ffi::S32> key_stop, ffi::Buffer<ffi::F32> key_bias, float scale,
                     int32_t variant, ffi::ResultBuffer<ffi::F32> out) {
  const auto qd = q.dimensions(), kd = k.dimensions(), vd = v.dimensions(), cd = cos.dimensions();
  if (qd.size() != 4 || kd.size() != 4 || vd.size() != 4 || cd.size() != 2)
    return ffi::Error::InvalidArgument("flamino_attention: q, k, v must be (B, T, H, hd), cos (P, hd/2)");
  Problem p{q.typed_data(), k.typed_data(), v.typed_data(), cos.typed_data(), sin.typed_data(),
            q_pos.typed_data(), k_pos.typed_data(), key_start.typed_data(), key_stop.typed_data(),
            key_bias.typed_data(), out->typed_data(),
            qd[0], qd[1], kd[1], qd[2], qd[3], cd[0], scale};
  const bool shapes_ok = kd[0] == p.batch && kd[2] == p.heads && kd[3] == p.head_dim &&
                         vd[0] == kd[0] && vd[1] == kd[1] && vd[2] == kd[2] && vd[3] == kd[3] &&
                         cd[1] * 2 == p.head_dim && sin.dimensions()[0] == cd[0] &&
                         static_cast<int64_t>(q_pos.element_count()) == p.batch * p.q_len &&
                         static_cast<int64_t>(key_start.element_count()) == p.batch * p.q_len &&
                         static_cast<int64_t>(key_stop.element_count()) == p.batch * p.q_len &&
                         static_cast<int64_t>(k_pos.element_count()) == p.batch * p.k_len &&
                         static_cast<int64_t>(key_bias.element_count()) == p.batch * p.k_len && p.table_len >= p.k_len;
  if (!shapes_ok) return ffi::Error::InvalidArgument("flamino_attention: inconsistent shapes");
  if (p.head_dim % 8 != 0)
    return ffi::Error::InvalidArgument("flamino_attention: head dimension must be a multiple of 8");
  Variant chosen = variant == kAuto ? best_variant() : static_cast<Variant>(variant);
  if (!cpu_has(chosen))
    return ffi::Error::InvalidArgument(std::string("flamino_attention: this CPU cannot run the ") +
                                       variant_name(chosen) + " variant");
  const TaskFn fn = task_fn(chosen);
  const int64_t tasks = p.batch * p.heads;
  if (tasks == 0 || p.q_len == 0) return ffi::Error::Success();
  auto progress = std::make_shared<Progress>();
  const int64_t helpers = std::min<int64_t>(pool.num_threads(), tasks) - 1;
  for (int64_t i = 0; i < helpers; ++i) pool.Schedule([progress, p, fn] { fn(p, *progress); });
  fn(p, *progress);
  while (progress->done.load(std::memory_order_acquire) < tasks) std::this_thread::yield();
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(FlaminoAttention, attention,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()  // q
                                  .Arg<ffi::Buffer<ffi::F32>>()  // k
                                  .Arg<ffi::Buffer<ffi::F32>>()  // v
                                  .Arg<ffi::Buffer<ffi::F32>>()  // cos
                                  .Arg<ffi::Buffer<ffi::F32>>()  // sin
                                  .Arg<ffi::Buffer<ffi::S32>>()  // q_pos
                                  .Arg<ffi::Buffer<ffi::S32>>()  // k_pos
                                  .Arg<ffi::Buffer<ffi::S32>>()  // key_start
                                  .Arg<ffi::Buffer<ffi::S32>>()  // key_stop
                                  .Arg<ffi::Buffer<ffi::F32>>()  // key_bias
                                  .Attr<float>("scale")
                                  .Attr<int32_t>("variant")
                                  .Ret<ffi::Buffer<ffi::F32>>());

// --- the Python module: the handler as a capsule for jax.ffi.register_ffi_target -------------
static PyObject* handler(PyObject*, PyObject*) {
  return PyCapsule_New(reinterpret_cast<void*>(&FlaminoAttention), nullptr, nullptr);
}

static PyObject* variants(PyObject*, PyObject*) {
  // {name: id} of the variants this CPU can run, best first.
  PyObject* out = PyDict_New();
  if (!out) return nullptr;
  for (Variant v : {kAvx512, kAvx2, kWide16OnAvx2, kPortable}) {
    if (!cpu_has(v)) continue;
    PyObject* id = PyLong_FromLong(v);
    if (!id || PyDict_SetItemString(out, variant_name(v), id) < 0) {
      Py_XDECREF(id);
      Py_DECREF(out);
      return nullptr;
    }
    Py_DECREF(id);
  }
  return out;
}

static PyObject* best(PyObject*, PyObject*) { return PyUnicode_FromString(variant_name(best_variant())); }

// The handler's argument list, as fused_attention.py (KERNEL_INTERFACE) expects it: bumped with
// every change to it, so that an extension built from older sources is refused, not called.
// 2: q_pos, k_pos, key_start, key_stop (packed rows).
static PyObject* interface(PyObject*, PyObject*) { return PyLong_FromLong(2); }

static PyMethodDef kMethods[] = {
    {"handler", handler, METH_NOARGS, "The XLA FFI handler (a PyCapsule) of the fused attention."},
    {"variants", variants, METH_NOARGS, "{name: id} of the instruction-set variants this CPU runs."},
    {"best_variant", best, METH_NOARGS, "The variant used by default on this CPU."},
    {"interface", interface, METH_NOARGS, "Version of the handler's argument list."},
    {nullptr, nullptr, 0, nullptr},
};

static PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_attention_cpu",
                              "flamino's fused attention kernel for XLA:CPU (see csrc/attention_cpu.cc).",
                              -1, kMethods};

PyMODINIT_FUNC PyInit__attention_cpu() { return PyModule_Create(&kModule); }
