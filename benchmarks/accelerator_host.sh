#!/bin/bash
# Sets up an accelerator host that already has JAX (jax/jaxlib 0.10.2 with its TPU/GPU runtime) but
# no route to PyPI: flamino's engine dependencies and the test references (torch CPU, transformers)
# from the host's own package index and wheel folder, plus the wheels in WHEELS (biopython,
# mini3di, fair-esm, pytest-xdist, execnet: ../shared/tools/accelerator-wheels.sh fetches such
# wheels), all into SITE, appended to PYTHONPATH so the host's JAX stays first. Source it:
#   INDEX=file:///opt/pypi/simple FIND_LINKS=/opt/wheels WHEELS=.whl-tpu source benchmarks/accelerator_host.sh
# A warm host (the device tool keeps one ~100 s after a call) reuses SITE: call again promptly.
# A host that reaches PyPI needs none of this: pip install -e '.[tpu]' (README "Accelerators").
SITE=${SITE:-/tmp/site}
pip_target() { PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-cache-dir --target "$SITE" "$@"; }
if [ -d "$SITE/flax" ] && [ -d "$SITE/pandas" ]; then  # a warm host kept the last call's install
  echo "reusing $SITE"
else
pip_target --only-binary=:all: --index-url "${INDEX:?}" ${FIND_LINKS:+--find-links "$FIND_LINKS"} \
  "flax==0.12.8" "orbax-checkpoint>=0.12,<0.13" "transformers>=5,<6" safetensors huggingface_hub pandas scipy "torch==2.13.0" \
  2>&1 | grep -v "^WARNING" | tail -3
[ -n "${WHEELS:-}" ] && pip_target --no-index --no-deps --upgrade "$WHEELS"/*.whl 2>&1 | grep -v "^WARNING" | tail -3
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$SITE:$PWD
python3 -c "import jax, flax, torch, transformers; print('ready:', jax.devices(), 'flax', flax.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
