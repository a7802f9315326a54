"""The reviewed mapping loads, the checked-in policy matches it, and bad mappings fail with the
file, the group and the problem in one sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.secrets.mapping import load_mapping, render_policy
from infra.secrets.secret_errors import MappingError

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_the_checked_in_policy_is_rendered_from_the_checked_in_mapping() -> None:
    mapping = load_mapping(REPO_ROOT / "infra" / "secrets.toml")

    assert (REPO_ROOT / "infra" / "vault-policy.hcl").read_text() == render_policy(mapping)


def test_the_policy_grants_read_on_each_mapped_data_path_only(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(
        'mount = "kv"\n'
        '[groups.a]\npath = "team/a"\nkeys = ["A"]\n'
        '[groups.b]\npath = "team/b"\nkeys = ["B"]\n'
    )

    policy = render_policy(load_mapping(path))

    paths = [line for line in policy.splitlines() if line.startswith("path ")]
    assert paths == ['path "kv/data/team/a" {', 'path "kv/data/team/b" {']
    assert policy.count('capabilities = ["read"]') == 2


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('[groups.a]\npath = "x"\nkeys = ["not-an-env"]\n', "groups.a.keys: Value error"),
        ('[groups.a]\npath = "x"\nkeys = []\n', "groups.a.keys"),
        ('[groups.a]\nkeys = ["A"]\n', "groups.a.path: Field required"),
        ('[groups.a]\npath = "../etc"\nkeys = ["A"]\n', "groups.a.path"),
        ('[groups.a]\npath = "x"\nkeys = ["A"]\nkey = 1\n', "groups.a.key: Extra inputs"),
        ('[groups.BAD]\npath = "x"\nkeys = ["A"]\n', "groups.BAD.name"),
        ("", "groups: Tuple should have at least 1 item"),
        ("groups = [", "is not valid TOML"),
    ],
)
def test_a_bad_mapping_fails_with_where_and_what(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "m.toml"
    path.write_text(body)

    with pytest.raises(MappingError) as raised:
        load_mapping(path)

    assert expected in str(raised.value)
    assert str(path) in str(raised.value)


def test_a_missing_mapping_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(MappingError, match="EVALBOT_SECRETS_MAPPING_PATH"):
        load_mapping(tmp_path / "absent.toml")
