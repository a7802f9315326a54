# The bot: the GitHub webhook, the dashboard (/dashboard) and /metrics, in uvicorn processes.
# Build from the repository root: docker build -f infra/docker/bot.Dockerfile -t evalbot-bot .
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    EVALBOT_DATA_DIR=/var/lib/evalbot EVALBOT_CATALOG_ROOT=/srv/catalog

RUN apt-get update \
 && apt-get install -y --no-install-recommends git \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --create-home --home-dir /var/lib/evalbot evalbot

WORKDIR /srv/evalbot
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY workflows ./workflows
COPY infra ./infra
COPY worlds /srv/catalog/worlds
COPY datasets /srv/catalog/datasets
RUN pip install --no-cache-dir .

USER evalbot
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
# Needs EVALBOT_TEMPORAL_ADDRESS (a cluster) for more than one process.
CMD ["evalbot", "serve", "--host", "0.0.0.0", "--port", "8000", "--processes", "2"]
