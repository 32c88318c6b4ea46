import json

from clusterdeck.core.cli.causetext import chain_json, chain_lines
from clusterdeck.core.protocol.causes import (
    CarriedBy,
    CauseChain,
    CauseEvent,
    CauseKind,
    EvidenceLine,
)


def test_a_chain_prints_as_a_tree_with_each_events_evidence() -> None:
    loss = CauseEvent(1, CauseKind.TASKMANAGER_LOST, 0.0, "TaskManager tm-2 lost: no heartbeat",
                      carried_by=CarriedBy("TaskManagerLost", "resourcemanager", 0.0),
                      taskmanager_id="tm-2")
    failed = CauseEvent(2, CauseKind.ATTEMPT_FAILED, 0.0, "TaskManagerLost: tm-2 lost", 1,
                        log_lines=(EvidenceLine("taskmanager-2", "last words"),),
                        taskmanager_id="tm-2", vertex_id="vertex-1", subtask=3, more=5)
    restart = CauseEvent(3, CauseKind.REGION_RESTARTED, 0.0, "a region restarts", 2)
    other = CauseEvent(4, CauseKind.ATTEMPT_FAILED, 0.0, "ValueError: bad", None,
                       vertex_id="vertex-2", subtask=0)
    chain = CauseChain((loss, failed, restart, other), dropped=2)
    assert chain_lines(chain) == [
        "- --:--:-- TaskManager tm-2 lost: no heartbeat",
        "  carried by TaskManagerLost from resourcemanager",
        "  - --:--:-- TaskManagerLost: tm-2 lost (vertex-1 subtask 3 on tm-2)",
        "    and 5 more like it",
        "    | taskmanager-2: last words",
        "    - --:--:-- a region restarts",
        "- --:--:-- ValueError: bad (vertex-2 subtask 0)",
        "(2 older event(s) not kept)",
    ]
    printed = json.loads(json.dumps(chain_json(chain)))  # as failures --json prints it
    assert [event["cause_id"] for event in printed["events"]] == [None, 1, 2, None]
    assert printed["events"][1]["log_lines"] == [
        {"process": "taskmanager-2", "line": "last words", "at": 0.0}]
