"""TopicLayout: the transport's topics, and reading them back."""

from __future__ import annotations

import pytest

from clusterdeck.core.rpc import TopicLayout, sent_by
from clusterdeck.core.rpc._topics import Route

LAYOUT = TopicLayout("clusterdeck/alpha", "alpha", server="jobmanager",
                     named_hosts=("taskexecutor",), shared=("client", "observer"))


def test_a_qualified_endpoint_id_becomes_two_levels_split_at_its_first_dot():
    assert LAYOUT.rpc("taskexecutor.host.example-7", "jobmanager") == \
        "clusterdeck/alpha/rpc/taskexecutor/alpha.host.example-7/alpha.jobmanager"
    assert LAYOUT.heartbeat("jobmaster.0123", "taskmanager-1") == \
        "clusterdeck/alpha/heartbeat/jobmaster/alpha.0123/alpha.taskmanager-1"


def test_an_endpoint_id_without_a_kind_stays_one_level():
    for endpoint_id in ("dispatcher", ".hidden", "trailing."):
        assert LAYOUT.rpc(endpoint_id, "client") == \
            f"clusterdeck/alpha/rpc/{endpoint_id}/alpha.client"


def test_the_last_level_is_the_sender_and_a_subscription_takes_any():
    assert LAYOUT.rpc("resourcemanager") == "clusterdeck/alpha/rpc/resourcemanager/+"
    assert LAYOUT.reply("taskmanager-1") == "clusterdeck/alpha/reply/alpha.taskmanager-1/+"
    assert LAYOUT.presence("taskmanager-1") == "clusterdeck/alpha/presence/taskmanager-1"


def test_a_shared_identity_s_replies_live_under_its_level_by_client_id():
    """What lets Mosquitto's ``%c`` bind them to one client of the shared login."""
    assert LAYOUT.reply("client-1", "jobmanager") == \
        f"clusterdeck/alpha/reply/alpha.client/{LAYOUT.client_id('client-1')}/alpha.jobmanager"
    assert LAYOUT.shared_identity("client-1") == "client"
    assert LAYOUT.shared_identity("client") is None
    assert LAYOUT.shared_identity("taskmanager-1") is None


@pytest.mark.parametrize("endpoint_id", ["resourcemanager", "taskexecutor.a.b.c",
                                         "jobmaster.x", ".hidden", "odd:id@host"])
def test_endpoint_topics_parse_back_to_their_endpoint_and_sender(endpoint_id):
    assert LAYOUT.parse(LAYOUT.rpc(endpoint_id, "tm-1")) == ("rpc", endpoint_id, "tm-1")
    assert LAYOUT.parse(LAYOUT.heartbeat(endpoint_id, "jobmanager")) == \
        ("heartbeat", endpoint_id, "jobmanager")


@pytest.mark.parametrize("service_id", ["client-1.x", "taskmanager-2", "jobmanager"])
def test_reply_topics_parse_back_to_their_service(service_id):
    assert LAYOUT.parse(LAYOUT.reply(service_id, "jobmanager")) == \
        ("reply", service_id, "jobmanager")


@pytest.mark.parametrize("topic", [
    "clusterdeck/alpha/rpc/taskexecutor/beta.tm-1/alpha.jobmanager",  # another cluster's
    "clusterdeck/alpha/rpc/taskexecutor/beta.tm-1",                   # no sender here
    "clusterdeck/alpha/rpc/dispatcher/beta.client",                   # a foreign sender
    "clusterdeck/alpha/reply/beta.client-1/alpha.jobmanager",
    "clusterdeck/alpha/reply/alpha.client-1/alpha.jobmanager",  # a client's, not in its level
    "clusterdeck/alpha/reply/alpha.client/alpha.taskmanager-1/alpha.jobmanager",
    "clusterdeck/alpha/reply/alpha./alpha.jobmanager",
    "clusterdeck/alpha/rpc/a/alpha.b/c/alpha.x",
    "clusterdeck/alpha/rpc",
])
def test_topics_of_no_endpoint_or_service_here_parse_to_none(topic):
    assert LAYOUT.parse(topic).name is None


def test_other_channels_parse_to_their_channel_only():
    assert LAYOUT.parse("clusterdeck/alpha/state/leader") == Route("state")


def test_who_hosts_an_endpoint():
    assert LAYOUT.host_of("taskexecutor.taskmanager-3") == "taskmanager-3"
    assert LAYOUT.host_of("jobmaster.j-1") == "jobmanager"
    assert LAYOUT.host_of("dispatcher") == "jobmanager"


def test_a_shared_identity_admits_its_processes_and_nobody_else():
    assert sent_by("client", "client-0123")
    assert sent_by("taskmanager-1", "taskmanager-1")
    assert not sent_by("taskmanager-1", "taskmanager-2")
    assert not sent_by("taskmanager-1", "taskmanager-10")
    assert not sent_by("client", "jobmanager")
