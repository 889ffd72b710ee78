"""The app's own calls (the app JWT): the app, its webhook deliveries, its installations, what each may see and which
one holds a repository; and who the app is on GitHub (its bot, or in token mode the token's person)."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from reviewer_app.github.api_transport import PER_PAGE, GitHubTransport, Json, split_repo
from reviewer_app.github.auth import PersonalToken


@dataclass(frozen=True)
class DeliveriesPage:
    """One page of the app's webhook deliveries, newest first; ``next_cursor`` None on the last page."""

    deliveries: list[Json]
    next_cursor: str | None


class AppCalls(GitHubTransport):
    """The app, its webhook deliveries and its installations."""

    async def bot_login(self) -> str:
        """The login the app's reviews and comments carry, e.g. ``reviewer-app[bot]``; in token mode the login of the
        person the token belongs to (``GET /user``, asked once)."""
        if isinstance(self.tokens, PersonalToken):
            return str((await self.token_user())["login"])
        return f"{(await self.app_info())['slug']}[bot]"

    async def repo_installation(self, repo: str) -> int | None:
        """The id of the App's installation that holds ``repo`` (app JWT), None when none does. A repository webhook
        (`gh webhook forward`) names no installation; the gate asks here."""
        body, _ = await self._call(
            "GET",
            "/repos/{owner}/{name}/installation",
            split_repo(repo),
            installation_id=None,
            what=f"the installation of {repo}",
            missing_ok=True,
        )
        found = body.get("id") if isinstance(body, dict) else None
        return found if isinstance(found, int) and not isinstance(found, bool) else None

    async def repository_id(self, repo: str) -> int | None:
        """The id GitHub gives ``repo`` (what the app keys a repository's learnings by), read with a token of the
        installation that holds it; None when no installation of the App holds it."""
        installation = await self.repo_installation(repo)
        if installation is None:
            return None
        body = await self._get(
            "/repos/{owner}/{name}", split_repo(repo), installation_id=installation, what=f"repository {repo}"
        )
        found = body.get("id") if isinstance(body, dict) else None
        return found if isinstance(found, int) and not isinstance(found, bool) else None

    async def list_app_deliveries(self, per_page: int = PER_PAGE, cursor: str | None = None) -> DeliveriesPage:
        body, next_url = await self._call(
            "GET",
            "/app/hook/deliveries{?per_page,cursor}",
            {"per_page": per_page, "cursor": cursor},
            installation_id=None,
            what="the app's webhook deliveries",
        )
        next_cursor = None
        if next_url is not None:
            next_cursor = urllib.parse.parse_qs(urllib.parse.urlsplit(next_url).query).get("cursor", [None])[0]
        return DeliveriesPage(deliveries=list(body), next_cursor=next_cursor)

    async def redeliver(self, delivery_id: int) -> None:
        await self._write(
            "POST",
            "/app/hook/deliveries/{delivery_id}/attempts",
            {"delivery_id": delivery_id},
            installation_id=None,
            what=f"webhook delivery {delivery_id}",
            data=b"",
        )

    async def list_installations(self) -> list[Json]:
        """Every installation of the app (app JWT), suspended ones included."""
        return await self._get_all(
            "/app/installations{?per_page}",
            {"per_page": PER_PAGE},
            installation_id=None,
            what="the app's installations",
        )

    async def get_app_installation(self, installation_id: int) -> Json | None:
        """The installation as GitHub knows it now (app JWT; ``suspended_at`` set when suspended), None when it is gone."""
        body, _ = await self._call(
            "GET",
            "/app/installations/{installation_id}",
            {"installation_id": installation_id},
            installation_id=None,
            what=f"installation {installation_id}",
            missing_ok=True,
        )
        return body if isinstance(body, dict) else None

    async def list_installation_repositories(self, installation_id: int) -> list[Json]:
        """The repositories the installation may access."""
        return await self._get_all(
            "/installation/repositories{?per_page}",
            {"per_page": PER_PAGE},
            installation_id=installation_id,
            what=f"repositories of installation {installation_id}",
            iterable_key="repositories",
        )
