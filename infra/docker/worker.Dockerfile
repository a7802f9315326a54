# A worker for one or more task-queue roles (runs, collect, score), against a Temporal cluster.
# Build from the repository root: docker build -f infra/docker/worker.Dockerfile -t evalbot-worker .
# The local sandbox provider (the default) runs bubblewrap AS ROOT (it builds each sandbox, then
# drops to a fresh uid; docs/sandbox.md) and needs cgroups and loop devices: run the container
# privileged, as root (the default here). With EVALBOT_PROVIDER=modal, whose sandboxes run remotely,
# build with --build-arg WORKER_USER=evalbot to run unprivileged (docs/deploy.md).
# tini is PID 1: it forwards SIGTERM to the worker (which stops cleanly within
# EVALBOT_GRACEFUL_SHUTDOWN_S) and reaps the detached sandbox runners re-parented to it.
FROM python:3.11-slim-bookworm

ARG WORKER_USER=root

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    EVALBOT_DATA_DIR=/var/lib/evalbot EVALBOT_CATALOG_ROOT=/srv/catalog

# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap git tini util-linux \
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

USER ${WORKER_USER}
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "evalbot", "worker"]
CMD ["--role", "runs", "--role", "collect", "--role", "score"]
