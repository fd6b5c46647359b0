"""Loaded by the Python of a test's Streamlit server (this folder is on its PYTHONPATH): when
``FLAMINO_TEST_ENGINE_LOG`` names a file, every call of the engine's public passes appends one
JSON line there (which pass, how many rows: sequences or masked positions), so a browser test
can tell which page ran the model. Nothing else changes."""

import os

_LOG = os.environ.get("FLAMINO_TEST_ENGINE_LOG")

if _LOG:
    import importlib.abc
    import json
    import sys
    import threading

    _lock = threading.Lock()

    def _write(entry: dict) -> None:
        with _lock, open(_LOG, "a") as handle:
            handle.write(json.dumps(entry) + "\n")

    def _wrap(engine_class) -> None:
        run, masked = engine_class.run, engine_class.compute_masked

        def logged_run(self, sequences, *args, **kwargs):
            layers = kwargs.get("repr_layers", ())
            _write({"call": "run", "rows": len(sequences), "logits": bool(kwargs.get("logits", True)),
                    "all_layers": len(tuple(layers)) == self.config.num_layers + 1})
            return run(self, sequences, *args, **kwargs)

        def logged_masked(self, sequence, positions=None, *args, **kwargs):
            positions = None if positions is None else list(positions)
            _write({"call": "masked", "rows": len(sequence) if positions is None else len(positions)})
            return masked(self, sequence, positions, *args, **kwargs)

        engine_class.run, engine_class.compute_masked = logged_run, logged_masked

    class _Hook(importlib.abc.MetaPathFinder):
        """Wraps ``flamino_core.engine.engine.Engine`` right after the module is imported."""

        def find_spec(self, name, path=None, target=None):
            if name != "flamino_core.engine.engine":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            loader = spec.loader
            original = loader.exec_module

            def exec_module(module):
                original(module)
                _wrap(module.Engine)

            loader.exec_module = exec_module
            return spec

    import importlib.util

    sys.meta_path.insert(0, _Hook())
