import json
import stat
from concurrent.futures import ThreadPoolExecutor

import pytest

from clusterdeck.broker.credentials import (
    ROLES,
    TASKMANAGER_LOGINS,
    CredentialsError,
    credentials_file,
    hand_out_taskmanager,
    load,
    load_or_create,
)


def test_credentials_file_is_private(tmp_path):
    cluster_dir = tmp_path / "clusters" / "alpha"
    load_or_create(cluster_dir, "alpha")
    assert stat.S_IMODE(credentials_file(cluster_dir).stat().st_mode) == 0o600
    assert stat.S_IMODE(cluster_dir.stat().st_mode) == 0o700


def test_credentials_are_stable_across_loads(tmp_path):
    first = load_or_create(tmp_path, "alpha")
    assert load_or_create(tmp_path, "alpha") == first
    assert load(tmp_path, "alpha") == first


def test_every_role_has_its_own_login_named_after_the_cluster(tmp_path):
    credentials = load_or_create(tmp_path, "alpha")
    logins = [credentials.for_role(role, "taskmanager-1") for role in ROLES]
    assert [user for user, _ in logins] == ["cd-alpha-jobmanager", "cd-alpha-taskmanager-1",
                                            "cd-alpha-client", "cd-alpha-observer"]
    assert len({password for _, password in credentials.items()}) == len(credentials.items())
    assert all(len(password) >= 32 for _, password in credentials.items())


def test_every_taskmanager_has_a_login_of_its_own_from_a_bounded_pool(tmp_path):
    credentials = load_or_create(tmp_path, "alpha")
    assert len(credentials.taskmanagers) == TASKMANAGER_LOGINS
    assert credentials.for_role("taskmanager", "taskmanager-64")[0] == \
        "cd-alpha-taskmanager-64"
    for name in (None, "taskmanager-65", "taskmanager-0", "host-123", "taskmanager"):
        with pytest.raises(CredentialsError, match="login of its own"):
            credentials.for_role("taskmanager", name)
    identities = {login.identity: login.role for login in credentials.all_logins()}
    assert identities["taskmanager-7"] == "taskmanager"
    assert identities["client"] == "client"


def test_handed_out_taskmanager_logins_come_from_the_top_and_never_twice(tmp_path):
    load_or_create(tmp_path, "alpha")
    handed = [hand_out_taskmanager(tmp_path, "alpha") for _ in range(3)]
    assert handed == ["taskmanager-64", "taskmanager-63", "taskmanager-62"]
    assert set(load(tmp_path, "alpha").exported) == set(handed)
    for _ in range(TASKMANAGER_LOGINS - 3):
        hand_out_taskmanager(tmp_path, "alpha")
    with pytest.raises(CredentialsError, match="all 64 TaskManager logins"):
        hand_out_taskmanager(tmp_path, "alpha")


def test_a_version_1_file_loses_its_shared_taskmanager_login_and_gains_the_pool(tmp_path):
    load_or_create(tmp_path, "alpha")
    path = credentials_file(tmp_path)
    data = json.loads(path.read_text())
    old = {"version": 1, "cluster_id": "alpha",
           "logins": {**data["logins"], "taskmanager": {"username": "cd-alpha-taskmanager",
                                                        "password": "x" * 32}}}
    path.write_text(json.dumps(old))
    credentials = load(tmp_path, "alpha")
    assert "cd-alpha-taskmanager" not in credentials.usernames()
    assert credentials.for_role("client") == (data["logins"]["client"]["username"],
                                              data["logins"]["client"]["password"])
    assert len(credentials.taskmanagers) == TASKMANAGER_LOGINS
    assert json.loads(path.read_text())["version"] == 2


def test_two_clusters_get_different_passwords(tmp_path):
    alpha = load_or_create(tmp_path / "alpha", "alpha")
    beta = load_or_create(tmp_path / "beta", "beta")
    assert alpha.for_role("client")[1] != beta.for_role("client")[1]


def test_a_loosened_file_mode_is_tightened_again(tmp_path):
    load_or_create(tmp_path, "alpha")
    credentials_file(tmp_path).chmod(0o644)
    load_or_create(tmp_path, "alpha")
    assert stat.S_IMODE(credentials_file(tmp_path).stat().st_mode) == 0o600


def test_repr_never_shows_a_password(tmp_path):
    credentials = load_or_create(tmp_path, "alpha")
    assert credentials.for_role("client")[1] not in repr(credentials)


def test_unknown_role_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown role"):
        load_or_create(tmp_path, "alpha").for_role("admin")


def test_credentials_of_another_cluster_are_refused(tmp_path):
    load_or_create(tmp_path, "alpha")
    with pytest.raises(CredentialsError, match="belongs to cluster 'alpha'"):
        load_or_create(tmp_path, "beta")


def test_loading_without_a_file_says_the_broker_never_started(tmp_path):
    with pytest.raises(CredentialsError, match="never been started"):
        load(tmp_path, "alpha")


def test_a_malformed_file_is_reported(tmp_path):
    load_or_create(tmp_path, "alpha")
    credentials_file(tmp_path).write_text(json.dumps({"version": 1}))
    with pytest.raises(CredentialsError, match="malformed"):
        load(tmp_path, "alpha")


@pytest.mark.parametrize("cluster_id", ["", "a/b", "a+b", "#", "a b", "-x", "x" * 65])
def test_cluster_ids_unsafe_in_topics_are_refused(tmp_path, cluster_id):
    with pytest.raises(ValueError, match="cluster id"):
        load_or_create(tmp_path, cluster_id)


def test_the_roles_include_a_read_only_observer():
    assert ROLES == ("jobmanager", "taskmanager", "client", "observer")


def older_file_without_observer(cluster_dir):
    load_or_create(cluster_dir, "alpha")
    path = credentials_file(cluster_dir)
    data = json.loads(path.read_text())
    del data["logins"]["observer"]
    path.write_text(json.dumps(data))
    return {role: (entry["username"], entry["password"])
            for role, entry in data["logins"].items()}


def test_a_file_from_before_the_observer_gets_its_login_and_keeps_the_others(tmp_path):
    before = older_file_without_observer(tmp_path)
    credentials = load_or_create(tmp_path, "alpha")
    assert credentials.for_role("observer")[0] == "cd-alpha-observer"
    assert {role: credentials.for_role(role) for role in before} == before
    assert load(tmp_path, "alpha") == credentials  # written down, not made up each time
    assert stat.S_IMODE(credentials_file(tmp_path).stat().st_mode) == 0o600


def test_a_client_reading_an_older_file_gets_its_login_too(tmp_path):
    before = older_file_without_observer(tmp_path)
    assert load(tmp_path, "alpha").for_role("client") == before["client"]


def test_processes_adding_the_missing_login_at_once_agree_on_it(tmp_path):
    older_file_without_observer(tmp_path)
    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(lambda _: load(tmp_path, "alpha").for_role("observer"),
                              range(16)))
    assert len(set(found)) == 1
    assert load(tmp_path, "alpha").for_role("observer") == found[0]
