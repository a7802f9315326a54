"""Settings: every environment variable of the flat settings still sets the same value in its
group, groups are built in code as dicts, and the values derived from them are unchanged."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from workflows.experiment_budget import default_budget
from workflows.redaction import PLACEHOLDER, Redactor
from workflows.settings import BudgetSettings, Settings, setting_fields

# Every variable Settings read before it had groups (one per field of the flat class), the path
# of the value it sets now, a value to set it to (not the default) and the value it parses to.
ENVIRONMENT: list[tuple[str, str, str, Any]] = [
    ("EVALBOT_DATA_DIR", "data_dir", "/srv/evalbot", Path("/srv/evalbot")),
    ("EVALBOT_CATALOG_ROOT", "catalog_root", "/srv/catalog", Path("/srv/catalog")),
    ("EVALBOT_DATABASE_URL", "store.database_url", "postgresql://u@h/db", "postgresql://u@h/db"),
    ("EVALBOT_BLOB_URL", "store.blob_url", "s3://bucket/evalbot", "s3://bucket/evalbot"),
    (
        "EVALBOT_BLOB_ENDPOINT_URL",
        "store.blob_endpoint_url",
        "http://minio:9000",
        "http://minio:9000",
    ),
    ("EVALBOT_BLOB_REGION", "store.blob_region", "eu-west-1", "eu-west-1"),
    ("EVALBOT_SHARED_LIMITS", "store.shared_limits", "false", False),
    ("EVALBOT_TEMPORAL_ADDRESS", "temporal.address", "temporal:7233", "temporal:7233"),
    ("EVALBOT_TEMPORAL_NAMESPACE", "temporal.namespace", "evals", "evals"),
    ("EVALBOT_TEMPORAL_API_KEY", "temporal.api_key", "tk", SecretStr("tk")),
    ("EVALBOT_TEMPORAL_TLS", "temporal.tls", "false", False),
    ("EVALBOT_RUN_TASK_QUEUE", "temporal.run_task_queue", "q-runs", "q-runs"),
    ("EVALBOT_COLLECT_TASK_QUEUE", "temporal.collect_task_queue", "q-collect", "q-collect"),
    ("EVALBOT_SCORE_TASK_QUEUE", "temporal.score_task_queue", "q-score", "q-score"),
    ("EVALBOT_PROVISION_TASK_QUEUE", "temporal.provision_task_queue", "q-prov", "q-prov"),
    ("EVALBOT_HEARTBEAT_TIMEOUT_S", "temporal.heartbeat_timeout_s", "45", 45),
    ("EVALBOT_GRACEFUL_SHUTDOWN_S", "temporal.graceful_shutdown_s", "12.5", 12.5),
    ("EVALBOT_HOST_AFFINITY", "temporal.host_affinity", "true", True),
    ("EVALBOT_HOST_ID", "temporal.host_id", "rack-2", "rack-2"),
    ("EVALBOT_HOST_LOST_S", "temporal.host_lost_s", "15", 15),
    ("EVALBOT_WORKFLOW_SANDBOX", "temporal.workflow_sandbox", "true", True),
    ("EVALBOT_PROVIDER", "sandbox.provider", "modal", "modal"),
    ("EVALBOT_ALLOW_PROCESS_PROVIDER", "sandbox.allow_process_provider", "true", True),
    ("EVALBOT_MAX_CONCURRENT_RUNS", "sandbox.max_concurrent_runs", "7", 7),
    ("EVALBOT_MAX_CONCURRENT_COLLECT", "sandbox.max_concurrent_collect", "5", 5),
    ("EVALBOT_MAX_CONCURRENT_SCORE", "sandbox.max_concurrent_score", "9", 9),
    ("EVALBOT_MAX_CONCURRENT_PROVISION", "sandbox.max_concurrent_provision", "33", 33),
    ("EVALBOT_PROVISION_RATE_PER_S", "sandbox.provision_rate_per_s", "2.5", 2.5),
    ("EVALBOT_EXPERIMENT_PARALLELISM", "sandbox.experiment_parallelism", "64", 64),
    ("EVALBOT_POLL_INTERVAL_S", "sandbox.poll_interval_s", "0.25", 0.25),
    ("EVALBOT_LOCAL_STAGE_MAX_S", "sandbox.local_stage_max_s", "0", 0),
    ("EVALBOT_RUN_BATCH_SIZE", "sandbox.run_batch_size", "3", 3),
    ("EVALBOT_SANDBOX_DIR", "sandbox.sandbox_dir", "/dev/shm/eb", Path("/dev/shm/eb")),
    ("EVALBOT_CGROUP_ROOT", "sandbox.cgroup_root", "/cg", Path("/cg")),
    ("EVALBOT_SANDBOX_CGROUPS", "sandbox.cgroups", "none", "none"),
    ("EVALBOT_PREWARM_KEEP", "sandbox.prewarm_keep", "5", 5),
    ("EVALBOT_WARM_POOL_SIZE", "sandbox.warm_pool_size", "4", 4),
    ("EVALBOT_BUILD_ALLOW_DOMAINS", "sandbox.build_allow_domains", '["pypi.org"]', ["pypi.org"]),
    ("EVALBOT_SANDBOX_PRICES", "sandbox.prices", '{"x": {"y": 2}}', {"x": {"y": 2}}),
    ("EVALBOT_MODAL_APP_NAME", "modal.app_name", "evalbot-test", "evalbot-test"),
    ("EVALBOT_MODAL_RUNTIME", "modal.runtime", "vm", "vm"),
    ("EVALBOT_MODAL_BASE_IMAGE", "modal.base_image", "im-123", "im-123"),
    ("EVALBOT_MODAL_CREATES_PER_S", "modal.creates_per_s", "0", 0.0),
    ("EVALBOT_MODAL_MAX_STARTING", "modal.max_starting", "12", 12),
    ("EVALBOT_MODAL_CREATE_ATTEMPTS", "modal.create_attempts", "2", 2),
    ("EVALBOT_MODAL_TIMEOUT_MARGIN_S", "modal.timeout_margin_s", "600", 600),
    ("EVALBOT_VAULT_ADDR", "secrets.vault_addr", "https://vault:8200", "https://vault:8200"),
    ("EVALBOT_VAULT_AUTH_METHOD", "secrets.vault_auth_method", "jwt", "jwt"),
    ("EVALBOT_VAULT_AUTH_MOUNT", "secrets.vault_auth_mount", "gha", "gha"),
    ("EVALBOT_VAULT_TOKEN", "secrets.vault_token", "hvs.t", SecretStr("hvs.t")),
    ("EVALBOT_VAULT_ROLE_ID", "secrets.vault_role_id", "role-1", "role-1"),
    ("EVALBOT_VAULT_SECRET_ID", "secrets.vault_secret_id", "sid", SecretStr("sid")),
    ("EVALBOT_VAULT_ROLE", "secrets.vault_role", "sync", "sync"),
    ("EVALBOT_VAULT_JWT", "secrets.vault_jwt", "ey.jwt", SecretStr("ey.jwt")),
    ("EVALBOT_VAULT_JWT_AUDIENCE", "secrets.vault_jwt_audience", "vault", "vault"),
    ("EVALBOT_VAULT_CA_CERT", "secrets.vault_ca_cert", "/ca.pem", "/ca.pem"),
    ("EVALBOT_VAULT_TIMEOUT_S", "secrets.vault_timeout_s", "3.5", 3.5),
    ("EVALBOT_SECRETS_MAPPING_PATH", "secrets.mapping_path", "/m.toml", Path("/m.toml")),
    ("EVALBOT_SECRETS_SINK", "secrets.sink", "modal", "modal"),
    ("EVALBOT_SECRETS_STALE_AFTER_S", "secrets.stale_after_s", "60", 60),
    ("EVALBOT_SECRETS_FINGERPRINT_KEY", "secrets.fingerprint_key", "k" * 32, SecretStr("k" * 32)),
    ("EVALBOT_GITHUB_WEBHOOK_SECRET", "github.webhook_secret", "whs", SecretStr("whs")),
    ("EVALBOT_GITHUB_API_URL", "github.api_url", "https://ghe/api/v3", "https://ghe/api/v3"),
    ("EVALBOT_GITHUB_TOKEN", "github.token", "ghp_x", SecretStr("ghp_x")),
    ("EVALBOT_GITHUB_APP_ID", "github.app_id", "42", "42"),
    ("EVALBOT_GITHUB_PRIVATE_KEY", "github.private_key", "PEM", SecretStr("PEM")),
    ("EVALBOT_GITHUB_PRIVATE_KEY_PATH", "github.private_key_path", "/k.pem", Path("/k.pem")),
    ("EVALBOT_GITHUB_BOT_LOGIN", "github.bot_login", "evalbot[bot]", "evalbot[bot]"),
    ("EVALBOT_GITHUB_CHECK_RUNS", "github.check_runs", "false", False),
    ("EVALBOT_GITHUB_TIMEOUT_S", "github.timeout_s", "4", 4),
    ("EVALBOT_MAX_TRIALS", "github.max_trials", "3", 3),
    ("EVALBOT_MAX_CASES", "github.max_cases", "20", 20),
    ("EVALBOT_MAX_BODY_BYTES", "github.max_body_bytes", "1024", 1024),
    ("EVALBOT_GITHUB_DELIVERY_LEASE_S", "github.delivery_lease_s", "60", 60.0),
    ("EVALBOT_GITHUB_ARM_CONFIG_KEYS", "github.arm_config_keys", "model,top_k", "model,top_k"),
    ("EVALBOT_PUBLIC_URL", "dashboard.public_url", "https://evals", "https://evals"),
    ("EVALBOT_JUDGE_BASE_URL", "judge.base_url", "https://j/v1", "https://j/v1"),
    ("EVALBOT_JUDGE_MODEL", "judge.model", "gpt-judge", "gpt-judge"),
    ("EVALBOT_JUDGE_API_KEY", "judge.api_key", "sk-j", SecretStr("sk-j")),
    ("EVALBOT_JUDGE_SECRET_GROUP", "judge.secret_group", "llm-keys", "llm-keys"),
    ("EVALBOT_JUDGE_SECRET_NAME", "judge.secret_name", "KEY", "KEY"),
    ("EVALBOT_JUDGE_RATE_PER_S", "judge.rate_per_s", "0", 0.0),
    ("EVALBOT_JUDGE_BURST", "judge.burst", "3", 3),
    ("EVALBOT_JUDGE_CONCURRENCY", "judge.concurrency", "2", 2),
    ("EVALBOT_JUDGE_TIMEOUT_S", "judge.timeout_s", "9", 9.0),
    ("EVALBOT_JUDGE_MAX_ATTEMPTS", "judge.max_attempts", "2", 2),
    ("EVALBOT_JUDGE_MALFORMED_ATTEMPTS", "judge.malformed_attempts", "1", 1),
    ("EVALBOT_JUDGE_TEMPERATURE", "judge.temperature", "0.5", 0.5),
    ("EVALBOT_JUDGE_CACHE_DIR", "judge.cache_dir", "/jc", Path("/jc")),
    ("EVALBOT_JUDGE_INPUT_USD_PER_MTOK", "judge.input_usd_per_mtok", "0.15", 0.15),
    ("EVALBOT_JUDGE_OUTPUT_USD_PER_MTOK", "judge.output_usd_per_mtok", "0.6", 0.6),
    ("EVALBOT_DASHBOARD_TOKEN", "dashboard.token", "dt", SecretStr("dt")),
    ("EVALBOT_DASHBOARD_GITHUB_ORG", "dashboard.github_org", "acme", "acme"),
    ("EVALBOT_DASHBOARD_METRICS_TOKEN", "dashboard.metrics_token", "mt", SecretStr("mt")),
    (
        "EVALBOT_DASHBOARD_INSECURE_LOCALHOST_COOKIES",
        "dashboard.insecure_localhost_cookies",
        "true",
        True,
    ),
    ("EVALBOT_GITHUB_OAUTH_CLIENT_ID", "dashboard.oauth_client_id", "cid", "cid"),
    ("EVALBOT_GITHUB_OAUTH_CLIENT_SECRET", "dashboard.oauth_client_secret", "cs", SecretStr("cs")),
    ("EVALBOT_GITHUB_OAUTH_URL", "dashboard.oauth_url", "https://ghe", "https://ghe"),
    ("EVALBOT_METRICS_APP_ADDRESS", "metrics.app_address", "10.0.0.1:9100", "10.0.0.1:9100"),
    ("EVALBOT_METRICS_WORKER_ADDRESS", "metrics.worker_address", "0.0.0.0:9464", "0.0.0.0:9464"),
    ("EVALBOT_METRICS_TEMPORAL_ADDRESS", "metrics.temporal_address", "[::]:9465", "[::]:9465"),
    ("EVALBOT_METRICS_QUEUE_DEPTH_INTERVAL_S", "metrics.queue_depth_interval_s", "5", 5.0),
    ("EVALBOT_BUDGET_USD", "budget.default_usd", "7", 7.0),
    ("EVALBOT_REPO_BUDGETS_USD", "budget.per_repo_usd", '{"acme/a": 2.5}', {"acme/a": 2.5}),
    ("EVALBOT_DAILY_CAP_USD", "budget.daily_cap_usd", "10", 10.0),
]


def value_at(settings: Settings, path: str) -> Any:
    value: Any = settings
    for part in path.split("."):
        value = getattr(value, part)
    return value


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("EVALBOT_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_the_table_covers_every_setting_and_every_flat_variable() -> None:
    """A setting added without a row here, or a row for a setting that went, fails."""
    paths = [path for path, _, _ in setting_fields()]
    assert sorted(paths) == sorted(path for _, path, _, _ in ENVIRONMENT)
    assert len({name for name, _, _, _ in ENVIRONMENT}) == len(ENVIRONMENT) == 105


@pytest.mark.parametrize(("variable", "path", "raw", "expected"), ENVIRONMENT)
def test_every_flat_environment_variable_sets_its_grouped_setting(
    clean_env: pytest.MonkeyPatch, variable: str, path: str, raw: str, expected: Any
) -> None:
    assert value_at(Settings(), path) != expected  # the default differs: the variable did it
    clean_env.setenv(variable, raw)
    assert value_at(Settings(), path) == expected
    assert dict((p, v) for p, v, _ in setting_fields())[path] == variable  # docs/settings.md


def test_the_same_variables_in_one_environment(clean_env: pytest.MonkeyPatch) -> None:
    for variable, _, raw, _ in ENVIRONMENT:
        clean_env.setenv(variable, raw)
    settings = Settings()
    for _, path, _, expected in ENVIRONMENT:
        assert value_at(settings, path) == expected, path


def test_grouped_names_are_not_read_where_a_field_keeps_its_old_variable(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """sandbox.provider is EVALBOT_PROVIDER only; EVALBOT_SANDBOX_PROVIDER means nothing."""
    clean_env.setenv("EVALBOT_SANDBOX_PROVIDER", "modal")
    clean_env.setenv("EVALBOT_BUDGET_DEFAULT_USD", "3")
    settings = Settings()
    assert (settings.sandbox.provider, settings.budget.default_usd) == ("local", None)


def test_a_variable_named_like_a_group_is_not_the_group(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("EVALBOT_SECRETS", "not json")
    clean_env.setenv("EVALBOT_SANDBOX", '{"provider": "modal"}')
    assert Settings().sandbox.provider == "local"


def test_code_gives_groups_as_dicts_over_the_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("EVALBOT_PROVIDER", "modal")
    clean_env.setenv("EVALBOT_MAX_CONCURRENT_RUNS", "7")
    settings = Settings(sandbox={"provider": "process"})
    assert (settings.sandbox.provider, settings.sandbox.max_concurrent_runs) == ("process", 7)


def test_flat_names_in_code_are_an_error_not_ignored(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="provider"):
        Settings(data_dir=tmp_path, provider="process")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="judge_model"):
        Settings(judge={"judge_model": "x"})


def test_with_changes_merges_into_groups_and_validates(tmp_path: Path) -> None:
    base = Settings(data_dir=tmp_path, sandbox={"provider": "process", "max_concurrent_runs": 3})
    changed = base.with_changes(
        catalog_root=tmp_path / "catalog", sandbox={"provider": "modal"}, github={"token": "t"}
    )
    assert changed.catalog_root == tmp_path / "catalog"
    assert (changed.sandbox.provider, changed.sandbox.max_concurrent_runs) == ("modal", 3)
    assert isinstance(changed.github.token, SecretStr)
    assert base.sandbox.provider == "process"  # a copy


def test_secrets_in_every_group_are_redacted(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        github={"token": "ghp_secret-one"},
        judge={"api_key": "sk-secret-two"},
        secrets={"vault_token": "hvs.secret-three"},
    )
    redactor = Redactor.from_settings(settings)
    redacted = redactor.redact("ghp_secret-one sk-secret-two hvs.secret-three")
    assert redacted == " ".join([PLACEHOLDER] * 3)


def test_experiment_parallelism_defaults_to_what_the_machine_holds() -> None:
    local = Settings(sandbox={"provider": "local", "max_concurrent_runs": 3})
    assert local.sandbox.resolved_experiment_parallelism == 6
    assert Settings(sandbox={"provider": "modal"}).sandbox.resolved_experiment_parallelism == 500
    explicit = Settings(sandbox={"provider": "local", "experiment_parallelism": 40})
    assert explicit.sandbox.resolved_experiment_parallelism == 40


def test_worker_run_slots_are_cores_plus_one_unless_set(clean_env: pytest.MonkeyPatch) -> None:
    assert Settings().sandbox.worker_run_slots == (os.cpu_count() or 1) + 1
    assert Settings(sandbox={"provider": "modal"}).sandbox.worker_run_slots == 500
    assert Settings(sandbox={"max_concurrent_runs": 3}).sandbox.worker_run_slots == 3


def test_sqlite_in_the_data_dir_unless_a_database_url_is_set(tmp_path: Path) -> None:
    default = Settings(data_dir=tmp_path)
    assert default.resolved_database_url == f"sqlite:///{(tmp_path / 'evalbot.db').resolve()}"
    postgres = Settings(data_dir=tmp_path, store={"database_url": "postgresql://u@h/db"})
    assert postgres.resolved_database_url == "postgresql://u@h/db"


def test_state_folders_are_under_the_data_dir(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path)
    assert (settings.blob_dir, settings.sandbox_dir, settings.image_dir, settings.secrets_dir) == (
        tmp_path / "blobs",
        tmp_path / "sandboxes",
        tmp_path / "images",
        tmp_path / "secrets",
    )
    assert settings.resolved_judge_cache_dir == tmp_path / "judge-cache"
    cached = Settings(data_dir=tmp_path, judge={"cache_dir": tmp_path / "jc"})
    assert cached.resolved_judge_cache_dir == tmp_path / "jc"
    clean_env.setenv("EVALBOT_SANDBOX_DIR", "/dev/shm/evalbot-sandboxes")
    moved = Settings(data_dir=tmp_path)  # only the sandboxes move (e.g. onto tmpfs)
    assert (moved.sandbox_dir, moved.blob_dir) == (
        Path("/dev/shm/evalbot-sandboxes"),
        tmp_path / "blobs",
    )


def test_environment_variables_configure_everything(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("EVALBOT_PROVIDER", "process")
    clean_env.setenv("EVALBOT_TEMPORAL_ADDRESS", "temporal:7233")
    settings = Settings()
    assert (settings.sandbox.provider, settings.temporal.address) == ("process", "temporal:7233")


def test_repo_budgets_are_keyed_as_the_lookup_tries_them(clean_env: pytest.MonkeyPatch) -> None:
    """The description says what keys EVALBOT_REPO_BUDGETS_USD takes, and they are the ones
    workflows.experiment_budget.default_budget tries: the bot's owner/name then clone URL, the
    CLI's --repo, else EVALBOT_BUDGET_USD."""
    clean_env.setenv(
        "EVALBOT_REPO_BUDGETS_USD",
        '{"acme/agent": 2.5, "https://github.com/acme/other.git": 1.25, "/src/agent": 0.5}',
    )
    clean_env.setenv("EVALBOT_BUDGET_USD", "7")
    settings = Settings()
    url = "https://github.com/acme/agent.git"
    assert default_budget(settings, "acme/agent", url) == 2.5
    assert default_budget(settings, "acme/other", "https://github.com/acme/other.git") == 1.25
    assert default_budget(settings, "/src/agent") == 0.5
    assert default_budget(settings, "acme/unlisted", "https://github.com/acme/unlisted.git") == 7.0
    description = BudgetSettings.model_fields["per_repo_usd"].description or ""
    for key in ("owner/name", "clone URL", "--repo", "EVALBOT_BUDGET_USD"):
        assert key in description


def test_collect_slots_follow_the_provider_unless_set(tmp_path: Path) -> None:
    def slots(**sandbox: Any) -> int:
        return Settings(data_dir=tmp_path, sandbox=sandbox).sandbox.collect_slots

    assert slots(provider="local") == 2  # bound by the local disk
    assert slots(provider="modal") == 16  # bound by round trips to the sandbox
    assert slots(provider="modal", max_concurrent_collect=3) == 3


def test_every_setting_is_described() -> None:
    """docs/settings.md is generated from the descriptions: none may be missing."""
    assert [path for path, _, info in setting_fields() if not info.description] == []


@pytest.mark.parametrize("address", ["9464", ":9464", "host:port", "host:70000"])
def test_a_metrics_address_that_is_not_host_port_is_refused(
    clean_env: pytest.MonkeyPatch, address: str
) -> None:
    clean_env.setenv("EVALBOT_METRICS_WORKER_ADDRESS", address)
    with pytest.raises(ValidationError, match="is not host:port"):
        Settings()
