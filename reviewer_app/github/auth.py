"""GitHub App credentials, app JWTs, and a cache of installation tokens (one per repository and kind of work) that
renews them before expiry; or, in token mode (`reviewer-app review`), one person's token used as it is."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import cachetools
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from gidgethub.abc import GitHubAPI
from gidgethub.apps import get_jwt

from reviewer_app.core.errors import PermanentError
from reviewer_app.github.scopes import current_work, token_request

log = logging.getLogger(__name__)

DEFAULT_SAFETY_MARGIN = 300.0  # renew a token with less than five minutes left


@dataclass(frozen=True)
class AppCredentials:
    """The app's id and private key (PEM). The key never appears in ``repr`` or ``str``."""

    app_id: str
    private_key: str = field(repr=False)

    def __repr__(self) -> str:
        return f"AppCredentials(app_id={self.app_id!r}, private_key=<redacted>)"

    __str__ = __repr__

    @functools.cached_property
    def signing_key(self) -> Any:
        """The parsed private key, loaded once: parsing the PEM costs more than signing (~60 ms vs 2 ms).

        PyJWT, and so gidgethub's ``get_jwt``, accept this object wherever they take the PEM text.
        """
        try:
            return load_pem_private_key(self.private_key.encode(), password=None)
        except (ValueError, TypeError):
            raise PermanentError(
                f"the private key configured for app {self.app_id} is not a usable PEM key; "
                "download a new one from the app's settings"
            ) from None

    def app_jwt(self) -> str:
        """A fresh app JWT (RS256, ten minutes, backdated a minute for clock drift, as gidgethub signs it)."""
        return get_jwt(app_id=self.app_id, private_key=self.signing_key)


@dataclass(frozen=True)
class InstallationToken:
    installation_id: int
    token: str = field(repr=False)
    expires_at: float  # epoch seconds

    def __repr__(self) -> str:
        return (
            f"InstallationToken(installation_id={self.installation_id}, token=<redacted>, expires_at={self.expires_at})"
        )


def parse_github_time(value: str) -> float:
    """Epoch seconds of GitHub's ISO 8601 timestamps such as ``2016-07-11T22:14:10Z``."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


TokenKey = tuple[int, str | None, str]  # (installation, "owner/name" or None, kind of work)


class TokenSource(Protocol):
    """Where the GitHub client's calls get their auth: an installation's tokens and the App's JWT, or a person's."""

    renews: bool  # whether a token GitHub refused (401) is worth asking for again

    async def get(self, installation_id: int, repo: str | None = None) -> str: ...
    def app_jwt(self) -> str: ...
    def invalidate(self, installation_id: int) -> None: ...
    def live_tokens(self) -> list[str]: ...


class PersonalToken:
    """Token mode: every call acts as the person (or the Actions run) a token belongs to: ``GITHUB_TOKEN``, or the
    GitHub CLI's. The token is used as it is: not minted by the app, it is neither narrowed to one repository and kind
    of work nor renewed, and there is no App JWT (the App's own calls refuse). The installation id the calls carry is
    ignored (``TOKEN_INSTALLATION``)."""

    renews = False

    def __init__(self, token: str) -> None:
        self._token = token

    def __repr__(self) -> str:
        return "PersonalToken(<redacted>)"

    __str__ = __repr__

    async def get(self, installation_id: int, repo: str | None = None) -> str:
        return self._token

    def app_jwt(self) -> str:
        raise PermanentError("this call needs the GitHub App's own credentials, and a personal token is not an App")

    def invalidate(self, installation_id: int) -> None:
        """Nothing to renew: a token GitHub refused stays refused."""

    def live_tokens(self) -> list[str]:
        return [self._token]


TOKEN_INSTALLATION = 0  # the installation a token-mode job names: a person's token speaks for no installation


class InstallationTokens:
    """The App's token source: installation access tokens, each for one repository and one kind of work's permissions (github/scopes.py),
    fetched once and shared until ``safety_margin`` seconds before expiry.

    A cached token is dropped from the cache (by cachetools' TLRU timer, driven by ``clock``) as soon as less
    than the margin is left, so no request goes out with a token that may expire on the way. Concurrent callers
    for one key share a single fetch.
    """

    renews = True

    def __init__(
        self,
        gh: GitHubAPI,
        credentials: AppCredentials,
        *,
        clock: Callable[[], float] = time.time,
        safety_margin: float = DEFAULT_SAFETY_MARGIN,
        maxsize: int = 10_000,
    ) -> None:
        self._gh = gh
        self._credentials = credentials
        self._clock = clock
        self._margin = safety_margin
        self._cache: cachetools.TLRUCache[TokenKey, InstallationToken] = cachetools.TLRUCache(
            maxsize, ttu=self._renew_at, timer=clock
        )
        self._locks: dict[TokenKey, asyncio.Lock] = {}

    def _renew_at(self, _key: TokenKey, token: InstallationToken, _now: float) -> float:
        return token.expires_at - self._margin

    def app_jwt(self) -> str:
        return self._credentials.app_jwt()

    async def get(self, installation_id: int, repo: str | None = None) -> str:
        """A token for ``repo`` ("owner/name"; None: installation-wide reads) of ``installation_id``, with the
        permissions of the work being done (``scopes.acting_as``), with at least the safety margin left."""
        key = (installation_id, repo, current_work())
        cached = self._cache.get(key)
        if cached is not None:
            return cached.token
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            cached = self._cache.get(key)  # another caller may have fetched it meanwhile
            if cached is not None:
                return cached.token
            return (await self._fetch(key)).token

    async def _fetch(self, key: TokenKey) -> InstallationToken:
        installation_id, repo, work = key
        answer = await self._gh.post(
            "/app/installations/{installation_id}/access_tokens",
            url_vars={"installation_id": str(installation_id)},
            data=token_request(repo, work),
            jwt=self.app_jwt(),
        )
        token = InstallationToken(
            installation_id=installation_id,
            token=answer["token"],
            expires_at=parse_github_time(answer["expires_at"]),
        )
        left = token.expires_at - self._clock()
        if left <= self._margin:
            # Usable for this one request only: the cache would drop it at once.
            log.warning(
                "installation %s token lives %.0fs, less than the %.0fs renewal margin",
                installation_id,
                left,
                self._margin,
            )
        else:
            log.debug("installation %s token for %s (%s) fetched, expires in %.0fs", installation_id, repo, work, left)
        self._cache[key] = token
        return token

    def invalidate(self, installation_id: int) -> None:
        """Forget the installation's tokens (after a 401, or when the app is uninstalled)."""
        for key in [k for k in list(self._cache.keys()) if k[0] == installation_id]:
            self._cache.pop(key, None)

    def live_tokens(self) -> list[str]:
        """The tokens held now, so error text can be scrubbed of them."""
        return [token.token for token in list(self._cache.values())]
