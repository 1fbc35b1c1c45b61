# GRE-bench service image: the same install steps as the README, as a non-root user.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GREBENCH_DATA_DIR=/data GREBENCH_APP_HOST=0.0.0.0 \
    HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 GRADIO_ANALYTICS_ENABLED=False LITELLM_LOCAL_MODEL_COST_MAP=True \
    GREBENCH_LOCAL_CANDIDATES= GREBENCH_LOCAL_JUDGES=

RUN useradd --create-home --uid 10001 grebench && mkdir -p /data /app && chown grebench:grebench /data /app
WORKDIR /app
COPY --chown=grebench:grebench . /app
USER grebench

# The README's setup step without the dev/hf extras: the image serves, the evaluation-LM runs in vLLM (compose.yaml
# sets GREBENCH_ESTIMATOR), and the built-in local candidate and judge (torch on this machine) are off above.
# EXTRAS: more extras for a cluster image (docs/scale.md): `docker build --build-arg EXTRAS='[hf,ray]' ...`
ARG EXTRAS=""
RUN python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e ".${EXTRAS}"
ENV PATH=/app/.venv/bin:$PATH

VOLUME /data
EXPOSE 7860
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:7860/', timeout=4); sys.exit(0)"
CMD ["grebench", "serve"]
