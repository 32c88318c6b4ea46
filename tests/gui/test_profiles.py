"""Cluster profiles are kept in the config dir and become configurations."""

from __future__ import annotations

import pytest

from clusterdeck.core.config import paths
from clusterdeck.gui.models.profiles import (
    ClusterProfile,
    ProfileError,
    ProfileStore,
    profiles_file,
)


def test_profiles_survive_a_new_store_in_the_users_order(tmp_path):
    store = ProfileStore(tmp_path / "profiles.json")
    store.put(ClusterProfile("big", taskmanagers=4, slots=8, broker_kind="mosquitto"))
    store.put(ClusterProfile("spark", spark_master="spark://somewhere:7077"))
    again = ProfileStore(tmp_path / "profiles.json")
    assert again.names() == ["default", "big", "spark"]
    assert again.get("big") == ClusterProfile("big", 4, 8, "mosquitto", "")


def test_renaming_replaces_the_profile_it_was(tmp_path):
    store = ProfileStore(tmp_path / "profiles.json")
    store.put(ClusterProfile("renamed", slots=3), replacing="default")
    assert store.names() == ["renamed"]


def test_the_last_profile_removed_leaves_a_default(tmp_path):
    store = ProfileStore(tmp_path / "profiles.json")
    store.remove("default")
    assert store.names() == ["default"]


def test_a_profile_becomes_the_users_configuration_with_its_values_on_top(tmp_path):
    users = tmp_path / "clusterdeck.toml"
    users.write_text('"heartbeat.interval" = 0.5\n"taskmanager.slots" = 9\n')
    config = ClusterProfile("c1", taskmanagers=3, slots=4, broker_kind="amqtt",
                            spark_master="local[2]").to_config(users)
    assert (config["cluster.id"], config["taskmanager.count"], config["taskmanager.slots"],
            config["broker.kind"], config["spark.master"]) == ("c1", 3, 4, "amqtt", "local[2]")
    assert config["heartbeat.interval"] == 0.5


def test_standby_jobmanagers_get_an_election_unless_the_user_chose_one(tmp_path):
    plain = tmp_path / "plain.toml"
    plain.write_text("")
    assert ClusterProfile("c1").to_config(plain)["ha.mode"] == "none"
    config = ClusterProfile("c1", jobmanagers=2).to_config(plain)
    assert (config["jobmanager.count"], config["ha.mode"]) == (2, "local")
    users = tmp_path / "clusterdeck.toml"
    users.write_text('"ha.mode" = "zookeeper"\n')
    assert ClusterProfile("c1", jobmanagers=3).to_config(users)["ha.mode"] == "zookeeper"


def test_taskmanagers_on_demand_make_the_taskmanagers_the_minimum(tmp_path):
    plain = tmp_path / "plain.toml"
    plain.write_text("")
    assert ClusterProfile("c1").to_config(plain)["elastic.provider"] == "none"
    config = ClusterProfile("c1", taskmanagers=1, max_taskmanagers=3).to_config(plain)
    assert (config["elastic.provider"], config["elastic.min-taskmanagers"],
            config["elastic.max-taskmanagers"]) == ("local", 1, 3)


@pytest.mark.parametrize("bad", [{"name": "has/slash"}, {"taskmanagers": 0},
                                 {"slots": 0}, {"broker_kind": "rabbit"},
                                 {"jobmanagers": 0}, {"jobmanagers": 9},
                                 {"taskmanagers": 3, "max_taskmanagers": 2},
                                 {"max_taskmanagers": 65}])
def test_a_bad_value_is_refused_with_its_field(bad):
    with pytest.raises(ProfileError):
        ClusterProfile(**bad)


def test_an_unreadable_file_falls_back_to_the_default_and_says_why(tmp_path):
    path = tmp_path / "profiles.json"
    path.write_text("{ not json")
    store = ProfileStore(path)
    assert store.names() == ["default"]
    assert "unreadable" in store.problem


def test_the_default_store_lives_in_the_config_dir():
    assert profiles_file().parent == paths.config_dir()
