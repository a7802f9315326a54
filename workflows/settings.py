"""All configuration, read from `EVALBOT_*` environment variables, in groups by concern.

`Settings` holds the state folders (`data_dir`, `catalog_root`) and one group per concern:
`settings.temporal.address`, `settings.sandbox.provider`, `settings.judge.model`, ... Each group
is a `BaseSettings` of its own whose variables are named `EVALBOT_<GROUP>_<FIELD>`; settings that
had another name before there were groups keep it through an explicit `validation_alias`
(`sandbox.provider` is `EVALBOT_PROVIDER`), so deployments set the same variables as ever.
`docs/settings.md` lists every variable; `tools/settings_doc.py` writes it from these models.

Build a `Settings` once at the edge (CLI, worker, web app) and pass it down; nothing reads the
environment at import time. In code (tests), groups are given as dicts or group instances:
`Settings(data_dir=path, sandbox={"provider": "process"})`; `settings.with_changes(...)` copies.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

PREFIX = "EVALBOT_"


def _group_config(group: str) -> SettingsConfigDict:
    """A group reads `EVALBOT_<GROUP>_<FIELD>`, or a field's alias (its older name); in code the
    field name is accepted too, and an unknown name is an error (not silently dropped)."""
    return SettingsConfigDict(
        env_prefix=f"{PREFIX}{group.upper()}_", extra="forbid", populate_by_name=True
    )


class _OneVariableEach(EnvSettingsSource):
    """The environment as pydantic-settings reads it, except that a field with an alias is read
    from the alias only. populate_by_name (field names in code) would also have it read
    `EVALBOT_<GROUP>_<FIELD>`: a second, undocumented variable for the same setting."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        self.config = {**self.config, "validate_by_name": False}


class _Group(BaseSettings):
    """One group of settings (its env_prefix from `_group_config`), composed into `Settings`."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _OneVariableEach(settings_cls), dotenv_settings, file_secret_settings


class TemporalSettings(_Group):
    """The Temporal cluster, the task queues the workers poll and how workflow code runs
    (docs/engine.md)."""

    model_config = _group_config("temporal")

    address: str | None = Field(
        None, description="host:port of a Temporal cluster; unset = start the embedded dev server."
    )
    namespace: str = Field("default", description="Temporal namespace of the experiments.")
    api_key: SecretStr | None = Field(
        None,
        description="API key for a Temporal Cloud namespace (sent as a Bearer token; turns TLS "
        "on). Unset: no key (self-hosted cluster, dev server).",
    )
    tls: bool | None = Field(
        None,
        description="TLS to the cluster with the system's CA roots; unset = on exactly when an "
        "API key is set.",
    )
    run_task_queue: str = Field(
        "evalbot-runs",
        validation_alias="EVALBOT_RUN_TASK_QUEUE",
        description="Queue of the workflows and the run stages (provision, execute, teardown).",
    )
    collect_task_queue: str = Field(
        "evalbot-collect",
        validation_alias="EVALBOT_COLLECT_TASK_QUEUE",
        description="Queue of `collect` (outputs into the blob store).",
    )
    score_task_queue: str = Field(
        "evalbot-score",
        validation_alias="EVALBOT_SCORE_TASK_QUEUE",
        description="Queue of `score` and the experiment's bookkeeping activities.",
    )
    provision_task_queue: str = Field(
        "evalbot-provision",
        validation_alias="EVALBOT_PROVISION_TASK_QUEUE",
        description="Queue of `provision` for remote providers (Modal), rate-limited server-side.",
    )
    heartbeat_timeout_s: int = Field(
        30,
        validation_alias="EVALBOT_HEARTBEAT_TIMEOUT_S",
        description="A stage whose worker stops heartbeating this long is retried elsewhere.",
    )
    graceful_shutdown_s: float = Field(
        30.0,
        ge=0,
        validation_alias="EVALBOT_GRACEFUL_SHUTDOWN_S",
        description="On SIGTERM or SIGINT, how long `evalbot worker` and `evalbot serve` let "
        "in-flight activities and requests finish before cancelling them (a cancelled stage is "
        "retried by another worker); then they stop their children and exit 0 (docs/deploy.md).",
    )
    host_affinity: bool = Field(
        False,
        validation_alias="EVALBOT_HOST_AFFINITY",
        description="Route each run's execute, collect and teardown to the worker host that "
        "provisioned its sandbox (its own task queue); turn on when several hosts run the local "
        'or process provider against one cluster (docs/engine.md, "Host queues").',
    )
    host_id: str = Field(
        "",
        validation_alias="EVALBOT_HOST_ID",
        description="This worker host's stable id, naming its host task queue "
        "(`<run_task_queue>@<host_id>`); empty = the hostname and a hash of `data_dir`.",
    )
    host_lost_s: int = Field(
        60,
        ge=1,
        validation_alias="EVALBOT_HOST_LOST_S",
        description="A host-queue stage no worker of that host starts within this long means the "
        "host is gone: the run is provisioned again on another host (docs/engine.md).",
    )
    workflow_sandbox: bool = Field(
        False,
        validation_alias="EVALBOT_WORKFLOW_SANDBOX",
        description="Run workflow code in Temporal's sandbox (it re-checks every activation for "
        "non-deterministic calls, ~40% of the worker's orchestration CPU). Off by default: the "
        "tests replay real histories through the sandbox instead (docs/engine.md).",
    )


class StoreSettings(_Group):
    """The results database and the blob store of run outputs (docs/store.md)."""

    model_config = _group_config("store")

    database_url: str | None = Field(
        None,
        validation_alias="EVALBOT_DATABASE_URL",
        description="SQLAlchemy URL; unset = SQLite in data_dir.",
    )
    blob_url: str = Field(
        "",
        validation_alias="EVALBOT_BLOB_URL",
        description="Where run outputs live: s3://bucket/prefix (any S3 API) or file:///path; "
        "unset = <data_dir>/blobs. S3 credentials: the standard AWS_* variables.",
    )
    blob_endpoint_url: str = Field(
        "",
        validation_alias="EVALBOT_BLOB_ENDPOINT_URL",
        description="S3 API endpoint for a non-AWS store (R2, GCS, MinIO): https://host[:port].",
    )
    blob_region: str = Field(
        "",
        validation_alias="EVALBOT_BLOB_REGION",
        description="S3 region; unset = AWS_REGION / AWS_DEFAULT_REGION, else us-east-1.",
    )
    shared_limits: bool = Field(
        True,
        validation_alias="EVALBOT_SHARED_LIMITS",
        description="judge.rate_per_s and modal.creates_per_s hold for every process using this "
        "database together (a bucket row each); false = each process on its own.",
    )


class SandboxSettings(_Group):
    """Where runs execute: the provider, how many at once, polling, which runs stay local and
    batch, cgroups, prewarmed images and the warm pool, build egress and sandbox prices
    (docs/sandbox.md, docs/prewarm.md)."""

    model_config = _group_config("sandbox")

    provider: str = Field(
        "local",
        validation_alias="EVALBOT_PROVIDER",
        description="Sandbox provider: local, process or modal.",
    )
    allow_process_provider: bool = Field(
        False,
        validation_alias="EVALBOT_ALLOW_PROCESS_PROVIDER",
        description="The process provider runs agents unisolated: opt in on purpose.",
    )
    max_concurrent_runs: int = Field(
        0,
        validation_alias="EVALBOT_MAX_CONCURRENT_RUNS",
        description="Sandboxes per worker; 0 = cores + 1 (500 on Modal).",
    )
    max_concurrent_collect: int = Field(
        0,
        ge=0,
        validation_alias="EVALBOT_MAX_CONCURRENT_COLLECT",
        description="Collect activities per worker; 0 = 2 for on-machine providers (local disk "
        "I/O), 16 on Modal (network round trips, spooled to disk).",
    )
    max_concurrent_score: int = Field(
        4,
        validation_alias="EVALBOT_MAX_CONCURRENT_SCORE",
        description="Score activities per worker.",
    )
    max_concurrent_provision: int = Field(
        100,
        ge=1,
        validation_alias="EVALBOT_MAX_CONCURRENT_PROVISION",
        description="Provision activities per worker (sandboxes starting at once).",
    )
    provision_rate_per_s: float = Field(
        5.0,
        ge=0,
        validation_alias="EVALBOT_PROVISION_RATE_PER_S",
        description="Provisions started per second across all workers; 0 = no cap.",
    )
    experiment_parallelism: int = Field(
        0,
        validation_alias="EVALBOT_EXPERIMENT_PARALLELISM",
        description="RunWorkflows an experiment keeps in flight (<= ~1,000); 0 = twice the "
        "worker's sandbox slots for on-machine providers, 500 for cloud providers.",
    )
    poll_interval_s: float = Field(
        0.0,
        ge=0,
        validation_alias="EVALBOT_POLL_INTERVAL_S",
        description="The longest wait between execute's polls of /out/.state.json (they start "
        "at 20 ms and double); 0 = 1 s on this machine, 5 s on Modal, where a poll is four "
        "API calls.",
    )
    local_stage_max_s: int = Field(
        120,
        ge=0,
        validation_alias="EVALBOT_LOCAL_STAGE_MAX_S",
        description="On providers that create sandboxes in milliseconds (local, process), runs "
        "whose run.timeout_s is at most this run every stage as a local activity of their "
        "RunWorkflow (one workflow task per run, not five); 0 = always regular activities.",
    )
    run_batch_size: int = Field(
        10,
        ge=1,
        validation_alias="EVALBOT_RUN_BATCH_SIZE",
        description="Cells per workflow for runs whose every stage is local "
        "(EVALBOT_LOCAL_STAGE_MAX_S): one RunBatchWorkflow runs them side by side, each stage "
        "still retried on its own; at most a quarter of the experiment's parallelism; 1 = one "
        "RunWorkflow per cell.",
    )
    sandbox_dir: Path | None = Field(
        None,
        validation_alias="EVALBOT_SANDBOX_DIR",
        description="Folder of the on-machine providers' sandboxes; unset = "
        "<data_dir>/sandboxes. Each cell makes and removes dozens of small files there: on tmpfs "
        "they are cheap, for the `process` provider with small outputs (tmpfs is memory: a "
        "disk-filling agent fills RAM, and `local` disk images there do not survive a reboot). "
        "It must allow running programs (the compiled runner lives there), and belong to one "
        'data_dir: a worker removes the leftover sandboxes it finds in it (docs/sandbox.md, "The '
        'file system under the sandboxes").',
    )
    cgroup_root: Path = Field(
        Path("/sys/fs/cgroup"),
        validation_alias="EVALBOT_CGROUP_ROOT",
        description="Where the cgroup controllers are mounted (local).",
    )
    cgroups: Literal["auto", "v1", "v2", "none"] = Field(
        "auto",
        description="How the local provider limits sandboxes: cgroup v1, cgroup v2 (a delegated "
        "subtree), none (rlimits: weaker memory, CPU and process limits), or auto (the host's "
        "cgroup version, none when it has no writable controllers). docs/sandbox.md.",
    )
    prewarm_keep: int = Field(
        3,
        ge=1,
        validation_alias="EVALBOT_PREWARM_KEEP",
        description="Prewarmed images kept per repo (plus those running experiments use).",
    )
    warm_pool_size: int = Field(
        0,
        ge=0,
        validation_alias="EVALBOT_WARM_POOL_SIZE",
        description="Sandboxes kept created and ready to claim (local provider); 0 = none.",
    )
    build_allow_domains: list[str] = Field(
        default_factory=list,
        validation_alias="EVALBOT_BUILD_ALLOW_DOMAINS",
        description="Hosts builds may reach through the egress proxy (JSON list: the package "
        "registries and their file hosts, *.suffix allowed); empty = builds have no network.",
    )
    prices: dict[str, dict[str, float]] = Field(
        default_factory=lambda: {"modal": {"cpu_core_s": 0.00003942, "memory_gib_s": 0.00000672}},
        description="USD per billed CPU core-second and GiB-second, by provider (JSON).",
    )

    @property
    def worker_run_slots(self) -> int:
        """Concurrent sandboxes per worker: the setting, or one per core plus one — or 500 on
        Modal, whose sandboxes run elsewhere (a worker only polls them)."""
        if self.max_concurrent_runs > 0:
            return self.max_concurrent_runs
        if self.provider == "modal":
            return 500
        return (os.cpu_count() or 1) + 1

    @property
    def collect_slots(self) -> int:
        """Concurrent collects per worker: local collects are bound by the disk, Modal's by
        round trips (each file is a few requests), so Modal gets more of them."""
        if self.max_concurrent_collect > 0:
            return self.max_concurrent_collect
        return 16 if self.provider == "modal" else 2

    @property
    def resolved_poll_interval_s(self) -> float:
        if self.poll_interval_s > 0:
            return self.poll_interval_s
        return 5.0 if self.provider == "modal" else 1.0

    @property
    def resolved_experiment_parallelism(self) -> int:
        """Runs in flight per experiment. On one machine, more than the worker can run only
        creates idle sandboxes, so the default is two per slot (one running, one ready)."""
        if self.experiment_parallelism > 0:
            return self.experiment_parallelism
        return 500 if self.provider == "modal" else 2 * self.worker_run_slots


class ModalSettings(_Group):
    """The Modal provider (workflows/providers/modal/, docs/modal.md)."""

    model_config = _group_config("modal")

    app_name: str = Field("evalbot", description="Modal App the sandboxes belong to.")
    runtime: Literal["gvisor", "vm"] | None = Field(
        None, description="Sandbox runtime; vm for agents that run Docker inside. Unset = Modal's."
    )
    base_image: str = Field(
        "", description="Image builds start from: im-... id or published name; unset = debian_slim."
    )
    creates_per_s: float = Field(
        5.0,
        ge=0,
        description="Sandbox creations per second, all workers together (store.shared_limits); "
        "0 = no cap.",
    )
    max_starting: int = Field(
        100, ge=0, description="Sandboxes starting at once per worker; 0 = no cap."
    )
    create_attempts: int = Field(
        8, ge=1, description="Tries of a creation Modal refuses (rate limit, quota)."
    )
    timeout_margin_s: int = Field(
        3600, ge=60, description="Sandbox lifetime beyond the run's timeout (collect, retries)."
    )


class GitHubSettings(_Group):
    """The GitHub bot: webhook, API credentials and what one /eval may ask for (bot/,
    docs/github-bot.md)."""

    model_config = _group_config("github")

    webhook_secret: SecretStr | None = Field(
        None, description="Secret GitHub signs webhook deliveries with (X-Hub-Signature-256)."
    )
    api_url: str = Field(
        "https://api.github.com", description="REST API base URL; Enterprise: https://HOST/api/v3."
    )
    token: SecretStr | None = Field(
        None, description="Personal access token (local use); unset = authenticate as a GitHub App."
    )
    app_id: str | None = Field(None, description="GitHub App id (production).")
    private_key: SecretStr | None = Field(None, description="GitHub App private key (PEM).")
    private_key_path: Path | None = Field(
        None, description="File holding the GitHub App private key (PEM), if not given inline."
    )
    bot_login: str | None = Field(
        None, description="Login the bot posts as (e.g. evalbot[bot]); unset = asked from GitHub."
    )
    check_runs: bool = Field(
        True, description="Mirror experiments as Check Runs (needs a GitHub App, not a PAT)."
    )
    timeout_s: int = Field(15, gt=0, description="Per-request timeout talking to GitHub.")
    max_trials: int = Field(
        10,
        ge=1,
        validation_alias="EVALBOT_MAX_TRIALS",
        description="Largest --trials a /eval command may ask for.",
    )
    max_cases: int = Field(
        200,
        ge=1,
        validation_alias="EVALBOT_MAX_CASES",
        description="Most cases one /eval experiment may select.",
    )
    max_body_bytes: int = Field(
        5 * 1024 * 1024,
        gt=0,
        validation_alias="EVALBOT_MAX_BODY_BYTES",
        description="Largest webhook body accepted (413 above).",
    )
    delivery_lease_s: float = Field(
        300.0,
        gt=0,
        description="How long a web process's claim on a webhook delivery lasts: a redelivery "
        "of a delivery whose process died mid-handling runs once it expires (docs/github-bot.md).",
    )
    arm_config_keys: str = Field(
        "model,mode,reasoning,temperature,top_k",
        description="Comma-separated config keys a /eval comment may set (--set, --arm); keys "
        "naming credentials or endpoints are refused even if listed.",
    )

    @property
    def allowed_arm_config_keys(self) -> frozenset[str]:
        """`arm_config_keys` as a set of keys."""
        return frozenset(k.strip() for k in self.arm_config_keys.split(",") if k.strip())


class JudgeSettings(_Group):
    """The LLM judge for `llm` criteria (workflows/scoring/llm_judge, docs/judges.md)."""

    model_config = _group_config("judge")

    base_url: str | None = Field(
        None, description="OpenAI-compatible base URL, e.g. https://api.openai.com/v1."
    )
    model: str = Field("gpt-4o-mini", description="Judge model; part of every cache key.")
    api_key: SecretStr | None = Field(
        None,
        description="Judge API key; unset = read from the secret store "
        "(EVALBOT_JUDGE_SECRET_GROUP).",
    )
    secret_group: str | None = Field(
        None, description="Secret group in the local secret store holding the judge key."
    )
    secret_name: str = Field(
        "OPENAI_API_KEY",
        description="Key name of the judge API key inside EVALBOT_JUDGE_SECRET_GROUP.",
    )
    rate_per_s: float = Field(
        5.0,
        ge=0,
        description="Judge requests per second, all workers together (store.shared_limits); "
        "0 = no cap.",
    )
    burst: int = Field(1, ge=1, description="Judge requests allowed back to back (cluster-wide).")
    concurrency: int = Field(4, ge=1, description="Judge requests in flight per worker.")
    timeout_s: float = Field(60.0, gt=0, description="Per-request judge timeout.")
    max_attempts: int = Field(6, ge=1, description="Tries per request (429, 5xx, timeouts).")
    malformed_attempts: int = Field(
        3, ge=1, description="Tries for a reply that is not a valid verdict."
    )
    temperature: float = Field(
        0.0,
        ge=0,
        le=2,
        description="Sampling temperature sent to the judge; part of the cache key.",
    )
    cache_dir: Path | None = Field(
        None, description="Where judgements are cached; unset = <data_dir>/judge-cache."
    )
    input_usd_per_mtok: float = Field(0.0, ge=0, description="Judge input price per 1M tokens.")
    output_usd_per_mtok: float = Field(0.0, ge=0, description="Judge output price per 1M tokens.")


class SecretsSettings(_Group):
    """Secrets: Vault -> provider secret groups, and the sync job's own state (infra/secrets,
    docs/secrets.md)."""

    model_config = _group_config("secrets")

    vault_addr: str | None = Field(
        None,
        validation_alias="EVALBOT_VAULT_ADDR",
        description="Vault/OpenBao URL, e.g. https://vault:8200.",
    )
    vault_auth_method: Literal["token", "approle", "jwt"] = Field(
        "token",
        validation_alias="EVALBOT_VAULT_AUTH_METHOD",
        description="How the secret sync logs in to Vault.",
    )
    vault_auth_mount: str | None = Field(
        None,
        validation_alias="EVALBOT_VAULT_AUTH_MOUNT",
        description="Mount path of the auth method; unset = the method's name.",
    )
    vault_token: SecretStr | None = Field(
        None,
        validation_alias="EVALBOT_VAULT_TOKEN",
        description="Vault token (auth method token).",
    )
    vault_role_id: str | None = Field(
        None,
        validation_alias="EVALBOT_VAULT_ROLE_ID",
        description="AppRole role_id (auth method approle).",
    )
    vault_secret_id: SecretStr | None = Field(
        None, validation_alias="EVALBOT_VAULT_SECRET_ID", description="AppRole secret_id."
    )
    vault_role: str | None = Field(
        None,
        validation_alias="EVALBOT_VAULT_ROLE",
        description="Vault role to log in as (auth method jwt).",
    )
    vault_jwt: SecretStr | None = Field(
        None,
        validation_alias="EVALBOT_VAULT_JWT",
        description="JWT for jwt login; unset = GitHub Actions OIDC token.",
    )
    vault_jwt_audience: str | None = Field(
        None,
        validation_alias="EVALBOT_VAULT_JWT_AUDIENCE",
        description="Audience requested for the GitHub Actions OIDC token.",
    )
    vault_ca_cert: str | None = Field(
        None,
        validation_alias="EVALBOT_VAULT_CA_CERT",
        description="CA bundle to verify Vault's TLS cert.",
    )
    vault_timeout_s: float = Field(
        10.0,
        gt=0,
        validation_alias="EVALBOT_VAULT_TIMEOUT_S",
        description="Per-request timeout talking to Vault.",
    )
    mapping_path: Path = Field(
        Path("infra/secrets.toml"), description="The reviewed Vault -> secret group mapping."
    )
    sink: str = Field("local", description="Where synced groups go: local (or modal).")
    stale_after_s: int = Field(
        7200, gt=0, description="`secrets status` flags groups not synced for this long."
    )
    fingerprint_key: SecretStr | None = Field(
        None, description="HMAC key for value fingerprints; unset = a key kept in data_dir."
    )


class DashboardSettings(_Group):
    """The dashboard (bot/dashboard/, docs/dashboard.md): a static token locally, GitHub OAuth
    limited to an organisation in production, and its public URL for links."""

    model_config = _group_config("dashboard")

    public_url: str | None = Field(
        None,
        validation_alias="EVALBOT_PUBLIC_URL",
        description="Base URL of the dashboard, for 'details' links in PR comments.",
    )
    token: SecretStr | None = Field(None, description="Static dashboard token (local).")
    github_org: str = Field("", description="GitHub org whose members may sign in.")
    oauth_client_id: str = Field(
        "",
        validation_alias="EVALBOT_GITHUB_OAUTH_CLIENT_ID",
        description="GitHub OAuth app client id.",
    )
    oauth_client_secret: SecretStr | None = Field(
        None,
        validation_alias="EVALBOT_GITHUB_OAUTH_CLIENT_SECRET",
        description="OAuth client secret.",
    )
    oauth_url: str = Field(
        "https://github.com",
        validation_alias="EVALBOT_GITHUB_OAUTH_URL",
        description="Where /login/oauth lives.",
    )
    metrics_token: SecretStr | None = Field(
        None,
        description="Token Prometheus sends for /metrics (Bearer, or as the Basic password); "
        "unset: /metrics refuses every request.",
    )
    insecure_localhost_cookies: bool = Field(
        False,
        description="Development only: cookies without Secure when the dashboard is reached at "
        "http://localhost or 127.0.0.1 (every other host still gets Secure cookies).",
    )


class MetricsSettings(_Group):
    """Where Prometheus scrapes the processes (docs/deploy.md, "Metrics"). The web app always has
    GET /metrics on its own port, behind EVALBOT_DASHBOARD_METRICS_TOKEN; each address here is an
    extra listener without a token, for a private interface."""

    model_config = _group_config("metrics")

    app_address: str | None = Field(
        None,
        description="host:port where `evalbot serve` also serves its metrics without a token "
        "(one listener for all --processes); unset: only the token-protected /metrics.",
    )
    worker_address: str | None = Field(
        None,
        description="host:port where `evalbot worker` serves its metrics (no token: bind a "
        "private interface); unset: the worker exports none.",
    )
    temporal_address: str | None = Field(
        None,
        description="host:port where the worker's Temporal SDK metrics are served (its "
        "Prometheus exporter); unset: none.",
    )
    queue_depth_interval_s: float = Field(
        15.0,
        ge=0,
        description="How often a worker with metrics reads its task queues' backlog "
        "(evalbot_task_queue_backlog); 0: never.",
    )

    @field_validator("app_address", "worker_address", "temporal_address")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"'{value}' is not host:port (e.g. 0.0.0.0:9464)")
        return value


class BudgetSettings(_Group):
    """Default budgets and the daily cap (workflows/experiment_budget.py, docs/cli.md)."""

    model_config = _group_config("budget")

    default_usd: float | None = Field(
        None,
        ge=0,
        validation_alias="EVALBOT_BUDGET_USD",
        description="Default per-experiment budget when --budget-usd is not given.",
    )
    per_repo_usd: dict[str, float] = Field(
        default_factory=dict,
        validation_alias="EVALBOT_REPO_BUDGETS_USD",
        description="Per-repository default budget, JSON {name: usd}: the bot looks a repository "
        "up under its owner/name, then its clone URL; the CLI under --repo as given. Repositories "
        "not listed get EVALBOT_BUDGET_USD.",
    )
    daily_cap_usd: float | None = Field(
        None,
        ge=0,
        validation_alias="EVALBOT_DAILY_CAP_USD",
        description="Spend per repository per UTC day; experiments stop at it.",
    )


class _TopLevelVariables(EnvSettingsSource):
    """The environment for `Settings` itself: its own fields only (EVALBOT_DATA_DIR, ...). Each
    group reads its variables when it is built; without this, a variable named like a group
    (EVALBOT_SECRETS) would be parsed as the whole group in JSON."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        if field_name in Settings.GROUPS:
            return None, field_name, False
        return super().get_field_value(field, field_name)


class Settings(BaseSettings):
    """The state folders, and one group per concern."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="forbid")

    GROUPS: ClassVar[tuple[str, ...]] = (
        "temporal",
        "store",
        "sandbox",
        "modal",
        "github",
        "judge",
        "secrets",
        "dashboard",
        "metrics",
        "budget",
    )

    data_dir: Path = Field(Path(".evalbot"), description="State: database, blobs, images.")
    catalog_root: Path = Field(Path("."), description="Folder holding worlds/ and datasets/.")

    temporal: TemporalSettings = Field(default_factory=TemporalSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    modal: ModalSettings = Field(default_factory=ModalSettings)
    github: GitHubSettings = Field(default_factory=GitHubSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    secrets: SecretsSettings = Field(default_factory=SecretsSettings)
    dashboard: DashboardSettings = Field(default_factory=DashboardSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            _TopLevelVariables(settings_cls),
            dotenv_settings,
            file_secret_settings,
        )

    def with_changes(self, **changes: Any) -> Settings:
        """A validated copy: a top-level value replaces the field, a mapping given for a group
        is merged into it (`settings.with_changes(sandbox={"provider": "process"})`). Unlike
        `model_copy`, values are validated (a str becomes a SecretStr, a Path a Path)."""
        values = self.model_dump()
        for name, value in changes.items():
            if name in self.GROUPS and isinstance(value, Mapping):
                values[name] = {**values[name], **value}
            else:
                values[name] = value
        return type(self)(**values)

    @property
    def resolved_database_url(self) -> str:
        """store.database_url, or SQLite at <data_dir>/evalbot.db."""
        if self.store.database_url:
            return self.store.database_url
        return f"sqlite:///{(self.data_dir / 'evalbot.db').resolve()}"

    @property
    def blob_dir(self) -> Path:
        """<data_dir>/blobs: the runs' outputs (the local blob store), or the S3 store's
        staging and scratch folder."""
        return self.data_dir / "blobs"

    @property
    def resolved_judge_cache_dir(self) -> Path:
        """judge.cache_dir, or <data_dir>/judge-cache."""
        return self.judge.cache_dir or self.data_dir / "judge-cache"

    @property
    def sandbox_dir(self) -> Path:
        """sandbox.sandbox_dir, or <data_dir>/sandboxes: the on-machine providers' sandboxes."""
        return self.sandbox.sandbox_dir or self.data_dir / "sandboxes"

    @property
    def image_dir(self) -> Path:
        """<data_dir>/images: built and prewarmed images of the on-machine providers."""
        return self.data_dir / "images"

    @property
    def secrets_dir(self) -> Path:
        """The local secret store (mode 0700), readable only by the service."""
        return self.data_dir / "secrets"


def env_var(model: type[BaseSettings], name: str) -> str:
    """The environment variable that sets field `name` of `model`: its alias, or the model's
    prefix + the field name."""
    alias = model.model_fields[name].validation_alias
    if isinstance(alias, str):
        return alias.upper()
    return f"{model.model_config.get('env_prefix', '')}{name}".upper()


def setting_fields() -> Iterator[tuple[str, str, FieldInfo]]:
    """Every setting as (path, environment variable, field): `data_dir`, ..., `judge.model`."""
    for name, info in Settings.model_fields.items():
        if name in Settings.GROUPS:
            continue
        yield name, env_var(Settings, name), info
    for group in Settings.GROUPS:
        model = group_model(group)
        for name, info in model.model_fields.items():
            yield f"{group}.{name}", env_var(model, name), info


def group_model(group: str) -> type[BaseSettings]:
    """The model of group `group` (`"judge"` -> JudgeSettings)."""
    annotation = Settings.model_fields[group].annotation
    if not (isinstance(annotation, type) and issubclass(annotation, BaseSettings)):
        raise TypeError(f"{group} is not a settings group")
    return annotation
