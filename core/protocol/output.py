"""What a task prints, passed on live to whoever follows the job (``clusterdeck submit``),
and how much of it a message may carry."""

from __future__ import annotations

from dataclasses import dataclass

from clusterdeck.core.rpc import message

PRINTED_KEPT = 16 * 1024
"""Characters of a task's or a job's printed output a message carries; the rest is in
files. A script that prints megabytes must not make its result larger than a frame."""


def printed_tail(text: str, kept: int = PRINTED_KEPT) -> str:
    """The end of ``text``, at most ``kept`` characters, saying how much was cut."""
    if len(text) <= kept:
        return text
    cut = len(text) - kept
    return f"[... {cut:,} earlier characters cut; all of it is in the output files]\n" + \
        text[cut:]


OUTPUT_PIECE = 16_000  # characters of printed output in one TaskOutput or JobOutput


@message
@dataclass(frozen=True)
class TaskOutput:
    """TaskExecutor -> JobMaster (tell), every few tenths of a second while a PySpark
    script prints: what it printed since, to be passed on to the submitter. ``path`` is
    the output file that will hold all of it (under the job's work dir, ``output/``) and
    ``offset`` the piece's start in that file's bytes; ``text`` at most OUTPUT_PIECE
    characters. The feed may skip (core/engine/liveoutput.py): the file never does."""

    job_id: str
    attempt_id: str
    stream: str  # "stdout" or "stderr"
    path: str
    offset: int
    text: str


@message
@dataclass(frozen=True)
class JobOutput:
    """JobMaster -> ``events/output/<job-id>``: a TaskOutput, passed on to whoever
    follows the job's output (``clusterdeck submit``)."""

    job_id: str
    attempt_id: str
    stream: str
    path: str
    offset: int
    text: str
