"""All configuration in one pydantic-settings class, read from `EVALBOT_*` environment variables.

Build a `Settings` once at the edge (CLI, worker, web app) and pass it down; nothing reads the
environment at import time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="EVALBOT_", extra="ignore")

    data_dir: Path = Field(Path(".evalbot"), description="State: database, blobs, images.")
    catalog_root: Path = Field(Path("."), description="Folder holding worlds/ and datasets/.")
    database_url: str | None = Field(None, description="SQLAlchemy URL; unset = SQLite.")

    temporal_address: str | None = Field(
        None, description="host:port of a Temporal cluster; unset = start the embedded dev server."
    )
    temporal_namespace: str = "default"
    run_task_queue: str = "evalbot-runs"
    collect_task_queue: str = "evalbot-collect"
    score_task_queue: str = "evalbot-score"

    provider: str = Field("local", description="Sandbox provider: local, process or modal.")
    allow_process_provider: bool = Field(
        False, description="The process provider runs agents unisolated: opt in on purpose."
    )
    max_concurrent_runs: int = Field(0, description="Sandboxes per worker; 0 = cores + 1.")
    max_concurrent_collect: int = Field(
        0,
        ge=0,
        description="Collect activities per worker; 0 = 2 for on-machine providers (local disk "
        "I/O), 16 on Modal (network round trips, spooled to disk).",
    )
    max_concurrent_score: int = Field(4, description="Score activities per worker.")
    poll_interval_s: float = Field(1.0, description="How often execute polls /out/.state.json.")
    local_stage_max_s: int = Field(
        120,
        ge=0,
        description="On providers that create sandboxes in milliseconds (local, process), runs "
        "whose run.timeout_s is at most this run every stage as a local activity of their "
        "RunWorkflow (one workflow task per run, not five); 0 = always regular activities.",
    )
    run_batch_size: int = Field(
        10,
        ge=1,
        description="Cells per workflow for runs whose every stage is local (local_stage_max_s): "
        "one RunBatchWorkflow runs them side by side, each stage still retried on its own; at "
        "most a quarter of the experiment's parallelism; 1 = one RunWorkflow per cell.",
    )
    workflow_sandbox: bool = Field(
        False,
        description="Run workflow code in Temporal's sandbox (it re-checks every activation for "
        "non-deterministic calls, ~40% of the worker's orchestration CPU). Off by default: the "
        "tests replay real histories through the sandbox instead (docs/engine.md).",
    )
    heartbeat_timeout_s: int = Field(
        30, description="A stage whose worker stops heartbeating this long is retried elsewhere."
    )
    experiment_parallelism: int = Field(
        0,
        description="RunWorkflows an experiment keeps in flight (<= ~1,000); 0 = twice the "
        "worker's sandbox slots for on-machine providers, 500 for cloud providers.",
    )
    provision_task_queue: str = Field(
        "evalbot-provision",
        description="Queue of `provision` for remote providers (Modal), rate-limited server-side.",
    )
    provision_rate_per_s: float = Field(
        5.0, ge=0, description="Provisions started per second across all workers; 0 = no cap."
    )
    max_concurrent_provision: int = Field(
        100, ge=1, description="Provision activities per worker (sandboxes starting at once)."
    )

    # Modal provider (workflows/providers/modal.py, docs/modal.md).
    modal_app_name: str = Field("evalbot", description="Modal App the sandboxes belong to.")
    modal_runtime: Literal["gvisor", "vm"] | None = Field(
        None, description="Sandbox runtime; vm for agents that run Docker inside. Unset = Modal's."
    )
    modal_base_image: str = Field(
        "", description="Image builds start from: im-... id or published name; unset = debian_slim."
    )
    modal_creates_per_s: float = Field(
        5.0, ge=0, description="Sandbox creations per second from one worker; 0 = no cap."
    )
    modal_max_starting: int = Field(
        100, ge=0, description="Sandboxes starting at once per worker; 0 = no cap."
    )
    modal_create_attempts: int = Field(
        8, ge=1, description="Tries of a creation Modal refuses (rate limit, quota)."
    )
    modal_timeout_margin_s: int = Field(
        3600, ge=60, description="Sandbox lifetime beyond the run's timeout (collect, retries)."
    )
    sandbox_prices: dict[str, dict[str, float]] = Field(
        default_factory=lambda: {"modal": {"cpu_core_s": 0.00003942, "memory_gib_s": 0.00000672}},
        description="USD per billed CPU core-second and GiB-second, by provider (JSON).",
    )

    # Prewarmed images, warm pool, build network (docs/prewarm.md).
    prewarm_keep: int = Field(
        3, ge=1, description="Prewarmed images kept per repo (plus those running experiments use)."
    )
    warm_pool_size: int = Field(
        0, ge=0, description="Sandboxes kept created and ready to claim (local provider); 0 = none."
    )
    cgroup_root: Path = Field(
        Path("/sys/fs/cgroup"), description="Where the cgroup controllers are mounted (local)."
    )
    build_allow_domains: list[str] = Field(
        default_factory=list,
        description="Hosts builds may reach through the egress proxy (JSON list: the package "
        "registries and their file hosts, *.suffix allowed); empty = builds have no network.",
    )

    # Secrets: Vault -> provider secret groups (infra/secrets, docs/secrets.md).
    vault_addr: str | None = Field(None, description="Vault/OpenBao URL, e.g. https://vault:8200.")
    vault_auth_method: Literal["token", "approle", "jwt"] = Field(
        "token", description="How the secret sync logs in to Vault."
    )
    vault_auth_mount: str | None = Field(
        None, description="Mount path of the auth method; unset = the method's name."
    )
    vault_token: SecretStr | None = Field(None, description="Vault token (auth method token).")
    vault_role_id: str | None = Field(None, description="AppRole role_id (auth method approle).")
    vault_secret_id: SecretStr | None = Field(None, description="AppRole secret_id.")
    vault_role: str | None = Field(None, description="Vault role to log in as (auth method jwt).")
    vault_jwt: SecretStr | None = Field(
        None, description="JWT for jwt login; unset = GitHub Actions OIDC token."
    )
    vault_jwt_audience: str | None = Field(
        None, description="Audience requested for the GitHub Actions OIDC token."
    )
    vault_ca_cert: str | None = Field(None, description="CA bundle to verify Vault's TLS cert.")
    vault_timeout_s: float = Field(10.0, gt=0, description="Per-request timeout talking to Vault.")
    secrets_mapping_path: Path = Field(
        Path("infra/secrets.toml"), description="The reviewed Vault -> secret group mapping."
    )
    secrets_sink: str = Field("local", description="Where synced groups go: local (or modal).")
    secrets_stale_after_s: int = Field(
        7200, gt=0, description="`secrets status` flags groups not synced for this long."
    )
    secrets_fingerprint_key: SecretStr | None = Field(
        None, description="HMAC key for value fingerprints; unset = a key kept in data_dir."
    )

    # GitHub bot (bot/, docs/github-bot.md).
    github_webhook_secret: SecretStr | None = Field(
        None, description="Secret GitHub signs webhook deliveries with (X-Hub-Signature-256)."
    )
    github_api_url: str = Field(
        "https://api.github.com", description="REST API base URL; Enterprise: https://HOST/api/v3."
    )
    github_token: SecretStr | None = Field(
        None, description="Personal access token (local use); unset = authenticate as a GitHub App."
    )
    github_app_id: str | None = Field(None, description="GitHub App id (production).")
    github_private_key: SecretStr | None = Field(None, description="GitHub App private key (PEM).")
    github_private_key_path: Path | None = Field(
        None, description="File holding the GitHub App private key (PEM), if not given inline."
    )
    github_bot_login: str | None = Field(
        None, description="Login the bot posts as (e.g. evalbot[bot]); unset = asked from GitHub."
    )
    github_check_runs: bool = Field(
        True, description="Mirror experiments as Check Runs (needs a GitHub App, not a PAT)."
    )
    github_timeout_s: int = Field(15, gt=0, description="Per-request timeout talking to GitHub.")
    public_url: str | None = Field(
        None, description="Base URL of the dashboard, for 'details' links in PR comments."
    )
    max_trials: int = Field(10, ge=1, description="Largest --trials a /eval command may ask for.")
    max_cases: int = Field(200, ge=1, description="Most cases one /eval experiment may select.")
    max_body_bytes: int = Field(
        5 * 1024 * 1024, gt=0, description="Largest webhook body accepted (413 above)."
    )

    # LLM judge for `llm` criteria (workflows/scoring/llm_judge, docs/judges.md).
    judge_base_url: str | None = Field(
        None, description="OpenAI-compatible base URL, e.g. https://api.openai.com/v1."
    )
    judge_model: str = Field("gpt-4o-mini", description="Judge model; part of every cache key.")
    judge_api_key: SecretStr | None = Field(
        None, description="Judge API key; unset = read from the secret store (judge_secret_group)."
    )
    judge_secret_group: str | None = Field(
        None, description="Secret group in the local secret store holding the judge key."
    )
    judge_secret_name: str = Field(
        "OPENAI_API_KEY", description="Key name of the judge API key inside judge_secret_group."
    )
    judge_rate_per_s: float = Field(5.0, ge=0, description="Judge requests per second; 0 = no cap.")
    judge_burst: int = Field(1, ge=1, description="Judge requests allowed back to back.")
    judge_concurrency: int = Field(4, ge=1, description="Judge requests in flight per worker.")
    judge_timeout_s: float = Field(60.0, gt=0, description="Per-request judge timeout.")
    judge_max_attempts: int = Field(6, ge=1, description="Tries per request (429, 5xx, timeouts).")
    judge_malformed_attempts: int = Field(
        3, ge=1, description="Tries for a reply that is not a valid verdict."
    )
    judge_temperature: float = Field(0.0, ge=0, le=2)
    judge_cache_dir: Path | None = Field(
        None, description="Where judgements are cached; unset = <data_dir>/judge-cache."
    )
    judge_input_usd_per_mtok: float = Field(
        0.0, ge=0, description="Judge input price per 1M tokens."
    )
    judge_output_usd_per_mtok: float = Field(
        0.0, ge=0, description="Judge output price per 1M tokens."
    )

    # Dashboard (bot/dashboard/, docs/dashboard.md): a static token locally, GitHub OAuth limited
    # to an organisation in production.
    dashboard_token: SecretStr | None = Field(None, description="Static dashboard token (local).")
    dashboard_github_org: str = Field("", description="GitHub org whose members may sign in.")
    github_oauth_client_id: str = Field("", description="GitHub OAuth app client id.")
    github_oauth_client_secret: SecretStr | None = Field(None, description="OAuth client secret.")
    github_oauth_url: str = Field("https://github.com", description="Where /login/oauth lives.")

    # Budgets (workflows/budget.py, docs/cli.md).
    budget_usd: float | None = Field(
        None, ge=0, description="Default per-experiment budget when --budget-usd is not given."
    )
    repo_budgets_usd: dict[str, float] = Field(
        default_factory=dict,
        description="Per-repository default budget, JSON {name: usd}: the bot looks a repository "
        "up under its owner/name, then its clone URL; the CLI under --repo as given. Repositories "
        "not listed get EVALBOT_BUDGET_USD.",
    )
    daily_cap_usd: float | None = Field(
        None, ge=0, description="Spend per repository per UTC day; experiments stop at it."
    )

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'evalbot.db').resolve()}"

    @property
    def blob_dir(self) -> Path:
        return self.data_dir / "blobs"

    @property
    def resolved_judge_cache_dir(self) -> Path:
        return self.judge_cache_dir or self.data_dir / "judge-cache"

    @property
    def sandbox_dir(self) -> Path:
        return self.data_dir / "sandboxes"

    @property
    def image_dir(self) -> Path:
        return self.data_dir / "images"

    @property
    def secrets_dir(self) -> Path:
        """The local secret store (mode 0700), readable only by the service."""
        return self.data_dir / "secrets"

    @property
    def resolved_experiment_parallelism(self) -> int:
        """Runs in flight per experiment. On one machine, more than the worker can run only
        creates idle sandboxes, so the default is two per slot (one running, one ready)."""
        if self.experiment_parallelism > 0:
            return self.experiment_parallelism
        return 500 if self.provider == "modal" else 2 * self.worker_run_slots

    @property
    def collect_slots(self) -> int:
        """Concurrent collects per worker: local collects are bound by the disk, Modal's by
        round trips (each file is a few requests), so Modal gets more of them."""
        if self.max_concurrent_collect > 0:
            return self.max_concurrent_collect
        return 16 if self.provider == "modal" else 2

    @property
    def worker_run_slots(self) -> int:
        """Concurrent sandboxes per worker: the setting, or one per core plus one — or 500 on
        Modal, whose sandboxes run elsewhere (a worker only polls them)."""
        if self.max_concurrent_runs > 0:
            return self.max_concurrent_runs
        if self.provider == "modal":
            return 500
        return (os.cpu_count() or 1) + 1
