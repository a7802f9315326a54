"""Dashboard routes under /dashboard: login, experiments list, experiment page, run transcripts
(streamed), dataset history. Every page but the login form requires authentication (auth.py)."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from bot.dashboard import auth
from bot.dashboard.charts import ChartPoint, history_svg
from bot.render import render_html
from workflows.catalog.models import ExperimentSpec
from workflows.history import HistoryPoint, is_main_evaluation, score_history
from workflows.records import RunResult
from workflows.report import build_report
from workflows.settings import Settings
from workflows.stats import Verdict
from workflows.store import ExperimentRecord, Store, StoreError

TEMPLATES = Path(__file__).parent / "templates"
ANSWER_PREVIEW_BYTES = 16 * 1024
CHUNK = 64 * 1024
TRANSCRIPT_FILES = ("transcript.jsonl", "transcript.md", "transcript.txt")
BODY = re.compile(r"<body[^>]*>(.*)</body>", re.S)


def _environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"])
    )


def read_preview(path: Path, limit: int = ANSWER_PREVIEW_BYTES) -> str:
    """At most `limit` bytes of a file, never the whole of a large one."""
    if not path.is_file():
        return ""
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    text = data[:limit].decode("utf-8", errors="replace")
    return text + ("\n…(truncated)" if len(data) > limit else "")


def answer_of(run: RunResult) -> str:
    if not run.outputs_ref:
        return ""
    out = Path(run.outputs_ref) / "out"
    for name in ("answer.md", "answer.json"):
        text = read_preview(out / name)
        if text:
            return text
    return ""


def transcript_path(run: RunResult) -> Path | None:
    if not run.outputs_ref:
        return None
    for name in TRANSCRIPT_FILES:
        path = Path(run.outputs_ref) / "out" / name
        if path.is_file():
            return path
    return None


async def stream_file(path: Path) -> AsyncIterator[bytes]:
    async with await anyio.open_file(path, "rb") as handle:
        while chunk := await handle.read(CHUNK):
            yield chunk


def side_by_side(spec: ExperimentSpec, runs: list[RunResult], base: str, head: str) -> list[Any]:
    """Per case: each arm's runs with answer, criteria (grade, rationale), wall time and cost."""
    by_key: dict[tuple[str, str], list[RunResult]] = {}
    for run in sorted(runs, key=lambda r: r.trial):
        by_key.setdefault((run.case_id, run.arm), []).append(run)
    cases = []
    for case_id in spec.case_ids:
        arms = []
        for arm in (base, head):
            arm_runs = [
                {
                    "run": r,
                    "answer": answer_of(r),
                    "cost": r.usage.cost_usd + r.sandbox.cost_usd,
                    "transcript": transcript_path(r) is not None,
                }
                for r in by_key.get((case_id, arm), [])
            ]
            arms.append({"name": arm, "runs": arm_runs})
        cases.append({"case_id": case_id, "arms": arms})
    return cases


def _regressed(spec: ExperimentSpec, runs: list[RunResult]) -> bool:
    if len(spec.arms) < 2:
        return False
    report = build_report(spec, runs)
    return bool(report.comparisons) and report.comparisons[0].verdict is Verdict.REGRESSED


def dashboard_router(settings: Settings, given_store: object) -> APIRouter:
    """The app's store when it is a Store (it is, outside unit tests of the webhook), else one
    opened from the settings."""
    store = given_store if isinstance(given_store, Store) else Store.from_settings(settings)
    router = APIRouter(prefix="/dashboard")
    env = _environment()

    def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**context), status_code=status)

    def require(request: Request) -> str:
        try:
            return auth.authenticate(settings, request)
        except auth.Unauthenticated as error:
            if "text/html" in request.headers.get("accept", ""):
                raise HTTPException(303, headers={"Location": "/dashboard/login"}) from None
            raise HTTPException(401, str(error), headers={"WWW-Authenticate": "Bearer"}) from None

    @router.get("/login", response_class=HTMLResponse)
    async def login_form() -> HTMLResponse:
        return page("login.html.j2", oauth=auth.oauth_enabled(settings), error="")

    @router.post("/login")
    async def login(request: Request) -> Response:
        form = urllib.parse.parse_qs((await request.body()).decode("utf-8", errors="replace"))
        token = (form.get("token") or [""])[0]
        if not auth.token_matches(settings, token):
            return page(
                "login.html.j2",
                401,
                oauth=auth.oauth_enabled(settings),
                error="That token is not valid.",
            )
        response = RedirectResponse("/dashboard/", status_code=303)
        response.set_cookie(
            auth.COOKIE,
            auth.session_cookie(settings, "token"),
            httponly=True,
            samesite="lax",
            max_age=auth.SESSION_S,
        )
        return response

    @router.get("/login/github")
    async def github_login(request: Request) -> Response:
        if not auth.oauth_enabled(settings):
            raise HTTPException(404, "GitHub sign-in is not configured")
        url, state = auth.oauth_redirect(settings, str(request.url_for("github_callback")))
        response = RedirectResponse(url, status_code=302)
        response.set_cookie(auth.STATE_COOKIE, state, httponly=True, samesite="lax", max_age=600)
        return response

    @router.get("/oauth/callback", name="github_callback")
    async def github_callback(request: Request, code: str = "", state: str = "") -> Response:
        expected = request.cookies.get(auth.STATE_COOKIE, "")
        if not auth.oauth_enabled(settings) or not state or state != expected:
            raise HTTPException(401, "sign-in state does not match")
        try:
            login = await auth.oauth_login(settings, code, str(request.url_for("github_callback")))
        except auth.Unauthenticated as error:
            raise HTTPException(403, str(error)) from None
        response = RedirectResponse("/dashboard/", status_code=303)
        response.set_cookie(
            auth.COOKIE,
            auth.session_cookie(settings, login),
            httponly=True,
            samesite="lax",
            max_age=auth.SESSION_S,
        )
        response.delete_cookie(auth.STATE_COOKIE)
        return response

    @router.get("/", response_class=HTMLResponse)
    async def experiments(
        request: Request,
        repo: str = "",
        pr: str = "",
        dataset: str = "",
        state: str = "",
        trigger: str = "",
    ) -> HTMLResponse:
        user = require(request)
        try:
            records = await anyio.to_thread.run_sync(
                lambda: store.list_experiments(
                    dataset=dataset or None, status=state or None, limit=500
                )
            )
        except StoreError as error:  # e.g. an unknown state
            raise HTTPException(400, str(error)) from None

        def keep(record: ExperimentRecord) -> bool:
            spec = record.spec
            repo_name = spec.labels.get("github_repo", spec.repo)
            return (
                (not repo or repo in (repo_name, spec.repo))
                and (not pr or spec.labels.get("pull_request") == pr)
                and (not trigger or spec.trigger == trigger)
            )

        rows = [r for r in records if keep(r)]
        filters = {"repo": repo, "pr": pr, "dataset": dataset, "state": state, "trigger": trigger}
        return page("list.html.j2", user=user, rows=rows, filters=filters)

    @router.get("/experiments/{experiment_id}", response_class=HTMLResponse)
    async def experiment(request: Request, experiment_id: str) -> HTMLResponse:
        user = require(request)
        record = store.get_experiment(experiment_id)
        if record is None:
            raise HTTPException(404, f"no experiment '{experiment_id}'")
        runs = await anyio.to_thread.run_sync(store.list_runs, experiment_id)
        report = build_report(record.spec, runs)
        match = BODY.search(render_html(report))
        table = match.group(1) if match else ""
        base = report.baseline
        head = report.comparisons[0].head if report.comparisons else base
        cases = side_by_side(record.spec, runs, base, head)
        return page(
            "experiment.html.j2",
            user=user,
            record=record,
            report=report,
            table=table,
            cases=cases,
            base=base,
            head=head,
        )

    @router.get("/runs/{run_id:path}/transcript")
    async def transcript(request: Request, run_id: str) -> StreamingResponse:
        require(request)
        run = store.get_run(run_id)
        path = transcript_path(run) if run is not None else None
        if path is None:
            raise HTTPException(404, "no transcript for this run")
        return StreamingResponse(stream_file(path), media_type="text/plain; charset=utf-8")

    @router.get("/datasets/{dataset}/history", response_class=HTMLResponse)
    async def history(request: Request, dataset: str) -> HTMLResponse:
        user = require(request)

        def load() -> list[ChartPoint]:
            points: list[HistoryPoint] = score_history(store, dataset)
            charted = []
            for point in points:
                record = store.get_experiment(point.experiment_id)
                runs = store.list_runs(point.experiment_id)
                regressed = (
                    record is not None
                    and is_main_evaluation(record)
                    and _regressed(record.spec, runs)
                )
                charted.append(
                    ChartPoint(
                        point=point,
                        url=f"/dashboard/experiments/{point.experiment_id}",
                        regression=regressed,
                        release=point.labels.get("release", ""),
                    )
                )
            return charted

        charted = await anyio.to_thread.run_sync(load)
        criteria = sorted({name for c in charted for name in c.point.criteria})
        return page(
            "history.html.j2",
            user=user,
            dataset=dataset,
            points=charted,
            criteria=criteria,
            chart=history_svg(charted),
        )

    return router
