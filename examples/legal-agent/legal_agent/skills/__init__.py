"""One module per kind of task; `answer(run, task)` dispatches."""

from __future__ import annotations

from legal_agent.run import Answer, Run
from legal_agent.skills import drafting, lists, lookup, register, summarise
from legal_agent.tasks import Task

SKILLS = {
    "lookup": lookup.answer,
    "list": lists.answer,
    "table": lists.table,
    "summary": summarise.answer,
    "compare": register.compare,
    "letter": drafting.letter,
    "redline": drafting.redline,
    "update": drafting.update,
}


def answer(run: Run, task: Task) -> Answer:
    return SKILLS[task.skill](run, task)
