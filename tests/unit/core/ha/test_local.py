"""ha.mode local: the leader lock and epoch file (core/ha/local.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from clusterdeck.core.ha.identity import own_identity
from clusterdeck.core.ha.local import EPOCH_FILE, EpochFileError, LocalElection, bump_epoch
from clusterdeck.core.ha.none import NoElection
from tests.waiting import wait_for


def test_the_epoch_counter_starts_at_one_and_only_grows(tmp_path: Path) -> None:
    path = tmp_path / EPOCH_FILE
    assert [bump_epoch(path) for _ in range(3)] == [1, 2, 3]


def test_a_standby_leads_when_the_leader_lets_go_with_the_next_epoch(tmp_path: Path) -> None:
    leader, standby = LocalElection(tmp_path), LocalElection(tmp_path)
    assert leader.run_for_leadership(threading.Event()).epoch == 1
    granted: list[int] = []
    waiting = threading.Thread(target=lambda: granted.append(
        standby.run_for_leadership(threading.Event()).epoch), daemon=True)
    waiting.start()
    wait_for(lambda: leader.standbys() == (own_identity(),), 5, "the standby listed")
    assert granted == []  # the flock holds it back while the leader lives
    leader.close()
    waiting.join(5)
    assert granted == [2] and (tmp_path / EPOCH_FILE).read_text() == "2\n"
    assert standby.standbys() == ()
    standby.close()


def test_a_standby_file_of_a_dead_process_names_nobody(tmp_path: Path) -> None:
    (tmp_path / "standbys").mkdir()
    (tmp_path / "standbys" / "4000000").write_text("pid 4000000 on host " + own_identity()
                                                   .rpartition(" ")[2])
    (tmp_path / "standbys" / "junk").write_text("not an identity")
    assert LocalElection(tmp_path).standbys() == ()


@pytest.mark.parametrize("content", ["", "x\n", "-3\n", "9" * 40])
def test_an_unreadable_epoch_is_an_error_not_a_restart_from_zero(tmp_path: Path,
                                                                 content: str) -> None:
    path = tmp_path / EPOCH_FILE
    path.write_text(content)
    with pytest.raises(EpochFileError):
        bump_epoch(path)


def test_without_ha_the_one_jobmanager_leads_at_epoch_zero() -> None:
    election = NoElection()
    assert election.run_for_leadership(threading.Event()).epoch == 0
    assert election.standbys() == ()
