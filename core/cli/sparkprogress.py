"""A running script's Spark stages drawn as spark-submit draws them on a terminal, after
Spark's ``ConsoleProgressBar``: ``[Stage 3:=====>          (120 + 4) / 200]``, one part
per running stage (at most ``STAGES_SHOWN``), sharing the terminal's width.

Only on a terminal (``ProgressBar`` in ``jobcommands.py`` decides): spark-submit's bar is
off when its output is not one either. Pure; called on the MQTT thread with each snapshot.
"""

from __future__ import annotations

from clusterdeck.core.protocol.sparkwork import SparkStage, SparkStageStatus, SparkWork

STAGES_SHOWN = 3  # as Spark's ConsoleProgressBar: more would not fit a line


def running_stages(work: tuple[SparkWork, ...]) -> list[SparkStage]:
    """The newest attempt's active stages, oldest first."""
    if not work:
        return []
    stages = [s for s in work[-1].stages if s.status is SparkStageStatus.ACTIVE]
    return stages[:STAGES_SHOWN]


def stage_line(stages: list[SparkStage], width: int) -> str:
    """One line for ``stages``, ``width`` characters shared among them; "" for none."""
    if not stages:
        return ""
    share = width // len(stages)
    return "".join(_stage_bar(stage, share) for stage in stages)


def _stage_bar(stage: SparkStage, width: int) -> str:
    retried = f".{stage.attempt}" if stage.attempt else ""
    header = f"[Stage {stage.stage_id}{retried}:"
    tail = f"({stage.done} + {stage.running}) / {stage.tasks}]"
    room = width - len(header) - len(tail)
    if room <= 0 or not stage.tasks:
        return header + tail
    filled = room * stage.done // stage.tasks
    bar = "".join("=" if i < filled else ">" if i == filled else " " for i in range(room))
    return header + bar + tail
