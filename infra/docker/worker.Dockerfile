# A worker for one or more task-queue roles (runs, collect, score), against a Temporal cluster.
# Build from the repository root: docker build -f infra/docker/worker.Dockerfile -t evalbot-worker .
# The local sandbox provider needs bubblewrap and user namespaces (run the container privileged,
# or use EVALBOT_PROVIDER=modal, whose sandboxes run remotely).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    EVALBOT_DATA_DIR=/var/lib/evalbot EVALBOT_CATALOG_ROOT=/srv/catalog

RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap git util-linux \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /var/lib/evalbot evalbot

WORKDIR /srv/evalbot
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY workflows ./workflows
COPY infra ./infra
COPY worlds /srv/catalog/worlds
COPY datasets /srv/catalog/datasets
RUN pip install --no-cache-dir .

USER evalbot
ENTRYPOINT ["evalbot", "worker"]
CMD ["--role", "runs", "--role", "collect", "--role", "score"]
