"""A running script's Spark stages, drawn as spark-submit's console progress bar draws them."""

from __future__ import annotations

from clusterdeck.core.cli.sparkprogress import STAGES_SHOWN, running_stages, stage_line
from clusterdeck.core.protocol.sparkwork import SparkStage, SparkStageStatus, SparkWork


def stage(stage_id: int, done: int = 120, running: int = 4, tasks: int = 200,
          status: SparkStageStatus = SparkStageStatus.ACTIVE, attempt: int = 0) -> SparkStage:
    return SparkStage(stage_id, attempt, 0, "count at job.py:3", status, tasks,
                      running=running, done=done)


def test_a_running_stage_is_drawn_as_spark_submit_draws_it() -> None:
    line = stage_line([stage(3)], 80)
    assert len(line) == 80
    assert line.startswith("[Stage 3:=") and line.endswith("(120 + 4) / 200]")
    bar = line[len("[Stage 3:"):-len("(120 + 4) / 200]")]
    assert bar.count("=") == len(bar) * 120 // 200 and bar.rstrip().endswith(">")


def test_stages_share_the_width_and_a_retried_one_says_its_attempt() -> None:
    line = stage_line([stage(3), stage(4, attempt=1, done=0, running=1, tasks=1)], 80)
    assert len(line) == 80 and "][Stage 4.1:" in line and line.endswith("(0 + 1) / 1]")


def test_only_the_newest_attempts_running_stages_are_drawn_at_most_three() -> None:
    old = SparkWork("j/v#0/a0", stages=(stage(1),))
    stages = [stage(n) for n in range(2, 8)] + [stage(9, status=SparkStageStatus.COMPLETE)]
    new = SparkWork("j/v#0/a1", stages=tuple(stages))
    assert [s.stage_id for s in running_stages((old, new))] == list(range(2, 2 + STAGES_SHOWN))
    assert running_stages(()) == [] and stage_line([], 80) == ""


def test_a_terminal_too_narrow_keeps_the_counts() -> None:
    assert stage_line([stage(3)], 10) == "[Stage 3:(120 + 4) / 200]"
