"""Builds flamino's optional fused-attention kernel; everything else is in pyproject.toml.

The kernel (csrc/attention_cpu.cc) is an XLA FFI custom call. It compiles against the FFI
headers that ship inside jaxlib (what ``jax.ffi.include_dir()`` returns), which is why
pyproject's ``[build-system] requires`` lists the pinned jaxlib. The extension is optional:
without a C++ compiler (or without the headers) the install still succeeds, and flamino runs
its pure-JAX attention instead (``flamino_core.model.fused_attention.status()`` says which).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from setuptools import Extension, setup


def xla_ffi_include_dir() -> str | None:
    """jaxlib's include folder (found without importing jaxlib), or None if it is missing."""
    spec = importlib.util.find_spec("jaxlib")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        include = Path(location) / "include"
        if (include / "xla" / "ffi" / "api" / "ffi.h").is_file():
            return str(include)
    return None


include = xla_ffi_include_dir()
ext_modules = []
if include is None:
    print("flamino: jaxlib's XLA FFI headers not found; skipping the fused attention kernel "
          "(the pure-JAX attention is used)", file=sys.stderr)
else:
    ext_modules.append(
        Extension(
            "flamino_core.model._attention_cpu",
            sources=[f"csrc/attention_{part}.cc" for part in ("cpu", "portable", "avx2", "avx512")],
            depends=["csrc/attention_kernel.h", "csrc/attention_tiles.h"],
            include_dirs=[include],
            language="c++",
            # No -ffast-math: the kernel's exp relies on exact float rounding (and parity on
            # IEEE arithmetic). Instruction sets are chosen per function in the source and
            # picked at run time, so no -march flag: the build runs on any x86-64 or arm64.
            extra_compile_args=["-std=c++17", "-O3", "-Wno-psabi"],
            # A failed compile (no compiler, an unsupported one) skips the kernel, not the install.
            optional=True,
        )
    )

setup(ext_modules=ext_modules)
