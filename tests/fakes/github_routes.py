"""Endpoint handlers of the fake GitHub (tests/fakes/github_server.py), one function each.

Each takes (fake, path match, query, JSON body, identity) and returns (status, body, headers).
The identity is an `Identity` for a token, "app" for a valid App JWT, else None.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tests.fakes.github_server import ApiError, Identity, new_installation_token, public

if TYPE_CHECKING:
    from tests.fakes.github_server import JSON, FakeGitHub

Result = tuple[int, Any, dict[str, str]]
PER_PAGE = 30


def _user(who: Any) -> Identity:
    if not isinstance(who, Identity):
        raise ApiError(401, "Bad credentials")
    return who


def _app(who: Any) -> None:
    if who != "app":
        raise ApiError(401, "A JSON web token could not be decoded")


def _full_name(match: dict[str, str]) -> str:
    return f"{match['owner']}/{match['name']}"


def _page(fake: FakeGitHub, path: str, query: dict[str, list[str]], items: list[Any]) -> Result:
    """GitHub-style pagination with a Link header."""
    per_page = int(query.get("per_page", [PER_PAGE])[0])
    page = int(query.get("page", ["1"])[0])
    chunk = items[(page - 1) * per_page : page * per_page]
    headers = {}
    if page * per_page < len(items):
        url = f"{fake.base_url}{path}?per_page={per_page}&page={page + 1}"
        headers["Link"] = f'<{url}>; rel="next"'
    return 200, chunk, headers


# -- App ------------------------------------------------------------------------------------------


def get_app(fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any) -> Result:
    _app(who)
    owner = {"login": "evalbot-org", "id": 1, "type": "Organization"}
    return 200, {"id": fake.app_id, "slug": fake.app_slug, "name": "evalbot", "owner": owner}, {}


def create_token(
    fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any
) -> Result:
    _app(who)
    token, expires = new_installation_token(fake, int(match["installation"]))
    stamp = datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return 201, {"token": token, "expires_at": stamp, "permissions": {}}, {}


def get_installation(
    fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any
) -> Result:
    _app(who)
    installation = fake.state.installations.get(_full_name(match))
    if installation is None:
        raise ApiError(404, "Not Found")
    return (
        200,
        {"id": installation, "app_id": fake.app_id, "account": {"login": match["owner"]}},
        {},
    )


def get_user(fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any) -> Result:
    return 200, _user(who).json(), {}


# -- repositories and pulls -----------------------------------------------------------------------


def get_repo(fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any) -> Result:
    _user(who)
    return 200, fake.repo(match), {}


def get_pull(fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any) -> Result:
    _user(who)
    pull = fake.state.pulls.get((_full_name(match), int(match["number"])))
    if pull is None:
        raise ApiError(404, "Not Found")
    return 200, pull, {}


def compare(fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any) -> Result:
    _user(who)
    key = (_full_name(match), match["base"], match["head"])
    merge_base = fake.state.merge_bases.get(key, match["base"])
    return 200, {"status": "ahead", "merge_base_commit": {"sha": merge_base}, "commits": []}, {}


def get_permission(
    fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any
) -> Result:
    _user(who)
    fake.repo(match)
    login = match["user"]
    level = fake.state.permissions.get((_full_name(match), login), fake.default_permission)
    return 200, {"permission": level, "role_name": level, "user": {"login": login, "id": 5}}, {}


# -- comments, reactions, labels ------------------------------------------------------------------


def list_comments(
    fake: FakeGitHub, match: dict[str, str], query: dict[str, list[str]], data: Any, who: Any
) -> Result:
    _user(who)
    repo, number = _full_name(match), int(match["number"])
    items = [
        public(c)
        for c in fake.state.comments.values()
        if c["_repo"] == repo and c["_number"] == number
    ]
    return _page(fake, f"/repos/{repo}/issues/{number}/comments", query, items)


def create_comment(
    fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any
) -> Result:
    identity = _user(who)
    fake.repo(match)
    body = (data or {}).get("body")
    if not isinstance(body, str) or not body:
        raise ApiError(422, "Validation Failed: body")
    if len(body) > 65536:
        raise ApiError(422, "Validation Failed: body is too long (maximum is 65536 characters)")
    comment = fake._new_comment(_full_name(match), int(match["number"]), body, identity)
    return 201, public(comment), {}


def _comment(fake: FakeGitHub, match: dict[str, str]) -> JSON:
    comment = fake.state.comments.get(int(match["id"]))
    if comment is None or comment["_repo"] != _full_name(match):
        raise ApiError(404, "Not Found")
    return comment


def get_comment(fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any) -> Result:
    _user(who)
    return 200, public(_comment(fake, match)), {}


def edit_comment(
    fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any
) -> Result:
    identity = _user(who)
    comment = _comment(fake, match)
    if comment["user"]["login"] != identity.login:
        raise ApiError(403, "Resource not accessible by integration")
    comment["body"] = (data or {}).get("body", comment["body"])
    comment["updated_at"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return 200, public(comment), {}


def delete_comment(
    fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any
) -> Result:
    identity = _user(who)
    comment = _comment(fake, match)
    if comment["user"]["login"] != identity.login:
        raise ApiError(403, "Resource not accessible by integration")
    del fake.state.comments[comment["id"]]
    return 204, None, {}


def create_reaction(
    fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any
) -> Result:
    identity = _user(who)
    comment = _comment(fake, match)
    content = (data or {}).get("content")
    if content not in {"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}:
        raise ApiError(422, "Validation Failed: content")
    for reaction in comment["_reactions"]:
        if reaction["content"] == content and reaction["user"]["login"] == identity.login:
            return 200, reaction, {}  # GitHub answers 200 with the existing reaction
    reaction = {"id": fake.new_id(), "content": content, "user": identity.json()}
    comment["_reactions"].append(reaction)
    return 201, reaction, {}


def remove_label(
    fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any
) -> Result:
    _user(who)
    pull = fake.state.pulls.get((_full_name(match), int(match["number"])))
    labels = pull["labels"] if pull else []
    remaining = [label for label in labels if label["name"] != match["label"]]
    if len(remaining) == len(labels):
        raise ApiError(404, "Label does not exist")
    labels[:] = remaining
    return 200, remaining, {}


# -- statuses and check runs ----------------------------------------------------------------------


def create_status(
    fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any
) -> Result:
    identity = _user(who)
    fake.repo(match)
    status = {
        "id": fake.new_id(),
        "state": data["state"],
        "context": data.get("context", "default"),
        "description": data.get("description"),
        "target_url": data.get("target_url"),
        "creator": identity.json(),
    }
    fake.state.statuses.setdefault((_full_name(match), match["sha"]), []).insert(0, status)
    return 201, status, {}


def list_statuses(
    fake: FakeGitHub, match: dict[str, str], query: dict[str, list[str]], data: Any, who: Any
) -> Result:
    _user(who)
    items = fake.state.statuses.get((_full_name(match), match["sha"]), [])
    return _page(fake, f"/repos/{_full_name(match)}/commits/{match['sha']}/statuses", query, items)


def _require_app_token(identity: Identity) -> None:
    if identity.type != "Bot":
        raise ApiError(403, "You must authenticate via a GitHub App.")


def create_check_run(
    fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any
) -> Result:
    identity = _user(who)
    _require_app_token(identity)
    repo = _full_name(match)
    fake.repo(match)
    run_id = fake.new_id()
    run = {
        "id": run_id,
        "name": data["name"],
        "head_sha": data["head_sha"],
        "external_id": data.get("external_id"),
        "status": data.get("status", "queued"),
        "conclusion": data.get("conclusion"),
        "details_url": data.get("details_url"),
        "output": data.get("output") or {},
        "url": f"{fake.base_url}/repos/{repo}/check-runs/{run_id}",
        "html_url": f"https://github.example/{repo}/runs/{run_id}",
        "app": {"id": fake.app_id, "slug": fake.app_slug},
        "_repo": repo,
    }
    fake.state.check_runs[run_id] = run
    return 201, public(run), {}


def _check_run(fake: FakeGitHub, match: dict[str, str]) -> JSON:
    run = fake.state.check_runs.get(int(match["id"]))
    if run is None or run["_repo"] != _full_name(match):
        raise ApiError(404, "Not Found")
    return run


def get_check_run(
    fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any
) -> Result:
    _user(who)
    return 200, public(_check_run(fake, match)), {}


def edit_check_run(
    fake: FakeGitHub, match: dict[str, str], query: Any, data: Any, who: Any
) -> Result:
    _require_app_token(_user(who))
    run = _check_run(fake, match)
    for key in ("status", "conclusion", "details_url", "output", "completed_at", "name"):
        if key in (data or {}):
            run[key] = data[key]
    return 200, public(run), {}


def list_check_runs(
    fake: FakeGitHub, match: dict[str, str], query: dict[str, list[str]], data: Any, who: Any
) -> Result:
    _user(who)
    repo, name = _full_name(match), query.get("check_name", [None])[0]
    items = [
        public(r)
        for r in fake.state.check_runs.values()
        if r["_repo"] == repo and r["head_sha"] == match["sha"] and name in (None, r["name"])
    ]
    return 200, {"total_count": len(items), "check_runs": items}, {}
