"""A package's door: the names the layers above import from a package, each imported from the
module that defines it on first use (PEP 562), as ``flamino_core/__init__.py`` does for the
package's face. A door costs nothing to import: the app's pages import no JAX until a model is
loaded (``tests/integration/test_imports.py``), so a door may not import its modules eagerly.

A package's ``__init__`` declares its door once::

    _EXPORTS = {"pae_heatmap": "figures", "fold_memory": "prediction"}
    __all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

``tests/unit/test_layers.py`` holds the app to its doors and each door to names its modules define.
"""

from __future__ import annotations

import importlib
import sys
from typing import Callable


def lazy_door(package: str, exports: dict[str, str],
              ) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` for ``package``'s ``__init__``: ``exports`` maps each
    public name to the module, relative to the package, that defines it.

    A name that is not exported raises ``AttributeError``, which lets ``from package import
    submodule`` fall back to importing the submodule, as it does without a door."""

    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{exports[name]}", package), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return sorted(exports), __getattr__, __dir__
