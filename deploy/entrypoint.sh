#!/bin/sh
# Fetch the model into the persistent cache on first start (a no-op once cached), then serve.
# A failed fetch is not fatal: the app shows what went wrong and offers to try again.
set -e
flamino fetch "${FLAMINO_MODEL}" || echo "model ${FLAMINO_MODEL} not fetched yet; the app will explain and retry"
exec streamlit run app.py \
    --server.port "${PORT:-8501}" \
    --server.address 0.0.0.0 \
    --server.headless true \
    --server.fileWatcherType none \
    --browser.gatherUsageStats false
