"""The GitHub Actions OIDC token, used to log in to Vault with the jwt method so CI holds no Vault
token. A job with `permissions: id-token: write` gets ACTIONS_ID_TOKEN_REQUEST_URL and
ACTIONS_ID_TOKEN_REQUEST_TOKEN; the token is requested for an audience the Vault role binds."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Mapping

from infra.secrets.secret_errors import VaultConfigError, VaultUnreachable

REQUEST_URL = "ACTIONS_ID_TOKEN_REQUEST_URL"
REQUEST_TOKEN = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"  # noqa: S105 (a variable name)


def github_actions_token(
    environ: Mapping[str, str], audience: str | None, timeout_s: float = 10.0
) -> str:
    """Fetch a fresh OIDC token from the Actions runtime; fails clearly outside GitHub Actions."""
    url, bearer = environ.get(REQUEST_URL), environ.get(REQUEST_TOKEN)
    if not url or not bearer:
        raise VaultConfigError(
            "jwt login needs EVALBOT_VAULT_JWT, or a GitHub Actions job with "
            "`permissions: id-token: write`"
        )
    if audience:
        url += ("&" if "?" in url else "?") + urllib.parse.urlencode({"audience": audience})
    if urllib.parse.urlsplit(url).scheme not in {"http", "https"}:
        raise VaultConfigError(f"{REQUEST_URL} must be an http(s) URL")
    headers = {"Authorization": f"bearer {bearer}"}
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 (scheme checked above)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
            value = json.load(response).get("value")
    except (OSError, ValueError) as error:
        raise VaultUnreachable(
            f"could not get the GitHub Actions OIDC token ({type(error).__name__})"
        ) from None
    if not isinstance(value, str) or not value:
        raise VaultUnreachable("the GitHub Actions OIDC endpoint returned no token")
    return value
