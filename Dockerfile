# The hosted demo as a container: pinned dependencies, the model fetched at first start into a
# persistent volume (/cache), hosted-mode limits on. See docs/deploy.md.
#   docker build -t flamino .
#   docker run -p 8501:8501 -v flamino-cache:/cache -e FLAMINO_MODEL=esm2_t12_35M_UR50D flamino
FROM python:3.11-slim

WORKDIR /app
COPY requirements.txt pyproject.toml setup.py README.md ./
COPY csrc ./csrc
COPY flamino_core ./flamino_core
# requirements.txt ends with "." : the pinned dependencies, then flamino itself (for `flamino fetch`).
# g++ is there only while installing: it compiles flamino's fused attention kernel (csrc/),
# then is removed (without it flamino would run its slower pure-JAX attention).
RUN apt-get update && apt-get install -y --no-install-recommends g++ \
    && pip install --no-cache-dir -r requirements.txt \
    && apt-get purge -y g++ && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*
COPY app.py ./
COPY app_pages ./app_pages
COPY assets ./assets
# The docs' text: pages open their passages where they explain a score (app_pages/_ui/frame/docs.py).
COPY docs/*.md ./docs/
COPY .streamlit ./.streamlit
COPY deploy/entrypoint.sh ./deploy/entrypoint.sh

# The cache folder must exist and belong to the app's user before VOLUME: changes made to a
# volume's path after it is declared are discarded.
RUN useradd --create-home flamino && mkdir -p /cache && chown flamino /cache
ENV FLAMINO_HOSTED=1 \
    FLAMINO_CACHE=/cache/flamino \
    HF_HOME=/cache/huggingface \
    FLAMINO_MODEL=esm2_t12_35M_UR50D \
    STREAMLIT_SERVER_MAX_UPLOAD_SIZE=2 \
    STREAMLIT_CLIENT_SHOW_ERROR_DETAILS=none
VOLUME /cache
EXPOSE 8501
USER flamino
HEALTHCHECK --interval=30s --timeout=5s --start-period=300s \
    CMD python -c "import os, urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ.get(\"PORT\", \"8501\")}/_stcore/health', timeout=4)"
ENTRYPOINT ["/app/deploy/entrypoint.sh"]
