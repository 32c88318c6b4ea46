"""A chain of causes as an observer receives it: what ``check_cause_chain`` refuses."""

from __future__ import annotations

import pytest

from clusterdeck.core.protocol.causes import (
    DEPTH_KEPT,
    EVENTS_KEPT,
    LINES_KEPT,
    TEXT_KEPT,
    CauseChain,
    CauseEvent,
    CauseKind,
    EvidenceLine,
    check_cause_chain,
    cut,
)


def event(event_id: int, cause_id: int | None = None, summary: str = "ValueError: x",
          **fields) -> CauseEvent:
    return CauseEvent(event_id, CauseKind.ATTEMPT_FAILED, 1.0, summary, cause_id, **fields)


def test_a_well_linked_chain_passes() -> None:
    check_cause_chain(CauseChain((event(1), event(2, 1), event(3, 2), event(4, 1))))


@pytest.mark.parametrize(("chain", "problem"), [
    (CauseChain((event(1), event(1))), "twice"),
    (CauseChain((event(2, 9),)), "lacks"),
    (CauseChain((event(1, 2), event(2, 1))), "cycle"),
    (CauseChain(tuple(event(i, i - 1 if i > 1 else None) for i in range(1, DEPTH_KEPT + 2))),
     "deeper"),
    (CauseChain(tuple(event(i) for i in range(EVENTS_KEPT + 1))), "at most"),
    (CauseChain((event(1, log_lines=(EvidenceLine("tm", "x"),) * (LINES_KEPT + 1)),)),
     "too long"),
    (CauseChain((event(1, summary="x" * (TEXT_KEPT + 1)),)), "too long"),
    (CauseChain((event(1, more=-1),)), "at most"),
])
def test_a_chain_no_honest_jobmaster_sends_is_refused(chain: CauseChain, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_cause_chain(chain)


def test_cut_keeps_the_start_within_the_bound() -> None:
    assert cut("short") == "short"
    assert len(cut("y" * 1000)) == TEXT_KEPT and cut("y" * 1000).endswith("…")
