# The hosted demo as a container: pinned dependencies, the model fetched at first start into a
# persistent volume (/cache), hosted-mode limits on.
#   docker build -t flamino .
#   docker run -p 8501:8501 -v flamino-cache:/cache -e FLAMINO_MODEL=esm2_t12_35M_UR50D flamino
FROM python:3.11-slim

WORKDIR /app
COPY requirements.txt pyproject.toml README.md ./
COPY flamino_core ./flamino_core
RUN pip install --no-cache-dir -r requirements.txt
COPY app.py ./
COPY app_pages ./app_pages
COPY assets ./assets
COPY .streamlit ./.streamlit
COPY deploy/entrypoint.sh ./deploy/entrypoint.sh

ENV FLAMINO_HOSTED=1 \
    FLAMINO_CACHE=/cache/flamino \
    HF_HOME=/cache/huggingface \
    FLAMINO_MODEL=esm2_t12_35M_UR50D
VOLUME /cache
EXPOSE 8501
RUN useradd --create-home flamino && mkdir -p /cache && chown flamino /cache
USER flamino
ENTRYPOINT ["/app/deploy/entrypoint.sh"]
