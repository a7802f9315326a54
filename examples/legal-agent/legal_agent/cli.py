"""Entry point: read /case/case.json, answer it over /world, write /out."""

from __future__ import annotations

import json
import sys
import traceback

from legal_agent import __version__, llm
from legal_agent.config import Paths, Settings
from legal_agent.corpus import load_matter
from legal_agent.run import Answer, Run
from legal_agent.skills import answer as run_skill
from legal_agent.tasks import read_task
from legal_agent.trace import Trace


def main(argv: list[str] | None = None) -> int:
    paths = Paths.from_env()
    paths.out.mkdir(parents=True, exist_ok=True)
    trace = Trace(paths.out / "transcript.jsonl", Settings().price)
    try:
        case = json.loads((paths.case / "case.json").read_text(encoding="utf-8"))
        settings = Settings.from_arm_config((case.get("arm") or {}).get("config") or {})
        trace.price = settings.price
        return _run(case, settings, paths, trace)
    except Exception as error:
        message = f"{type(error).__name__}: {error}"
        trace.step("error", error=message, traceback=traceback.format_exc())
        print(f"legal_agent: {message}", file=sys.stderr)
        return 1
    finally:
        _write_usage(paths, trace)
        trace.close()


def _run(case: dict, settings: Settings, paths: Paths, trace: Trace) -> int:
    trace.step(
        "start",
        agent=f"legal_agent {__version__}",
        case=case.get("id"),
        arm=(case.get("arm") or {}).get("name"),
        trial=case.get("trial"),
        seed=case.get("seed"),
        settings=settings.__dict__,
    )
    world_info = case.get("world") if isinstance(case.get("world"), dict) else {}
    matter = load_matter(paths.world, world_info.get("acting_user"))
    trace.step(
        "matter",
        documents=len(matter.documents),
        readable=len(matter.readable),
        user=matter.user,
        respect_permissions=settings.respect_permissions,
    )
    run = Run(case, settings, matter, paths, trace)
    trace.read(run.prompt)
    existing = {
        p.relative_to(paths.world).as_posix() for p in paths.world.rglob("*") if p.is_file()
    }
    task = read_task(run.prompt, existing)
    trace.step(
        "plan",
        skill=task.skill,
        topics=list(task.topics),
        save_path=task.save_path,
        update_path=task.update_path,
        json=task.wants_json,
    )
    result = run_skill(run, task)
    text = render(run, result)
    text = _maybe_polish(run, text)
    (paths.out / "answer.md").write_text(text, encoding="utf-8")
    trace.wrote(text)
    if result.data is not None:
        payload = json.dumps(result.data, indent=2, ensure_ascii=False)
        (paths.out / "answer.json").write_text(payload + "\n", encoding="utf-8")
        trace.wrote(payload)
    trace.step("answer", chars=len(text), sources=result.sources, slips=run.slips.__dict__)
    return 0


def render(run: Run, result: Answer) -> str:
    """The answer and its numbered sources; a model that slips cites titles instead of paths."""
    lines = [result.text.rstrip(), ""]
    if result.sources:
        lines.append("Sources:")
        for number, path in enumerate(result.sources, start=1):
            doc = run.matter.document(path)
            title = doc.title if doc else path
            shown = title if run.slips.cite_titles else f"{path} — {title}"
            lines.append(f"[{number}] {shown}")
    return "\n".join(lines).rstrip() + "\n"


def _maybe_polish(run: Run, text: str) -> str:
    if run.settings.llm == "off" or not llm.configured():
        return text
    try:
        polished, usage = llm.polish(run.prompt, text, run.settings.model)
    except (OSError, ValueError, KeyError) as error:
        run.trace.step("llm_error", error=str(error))
        return text
    run.trace.input_tokens += int(usage.get("prompt_tokens", 0))
    run.trace.output_tokens += int(usage.get("completion_tokens", 0))
    run.trace.step("llm", model=run.settings.model, usage=usage)
    return polished


def _write_usage(paths: Paths, trace: Trace) -> None:
    (paths.out / "usage.json").write_text(json.dumps(trace.usage()) + "\n", encoding="utf-8")
