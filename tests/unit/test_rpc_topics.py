"""TopicLayout: the transport's topics, and reading them back."""

from __future__ import annotations

import pytest

from clusterdeck.core.rpc import TopicLayout

LAYOUT = TopicLayout("clusterdeck/alpha", "alpha")


def test_a_qualified_endpoint_id_becomes_two_levels_split_at_its_first_dot():
    assert LAYOUT.rpc("taskexecutor.host.example-7") == \
        "clusterdeck/alpha/rpc/taskexecutor/alpha.host.example-7"
    assert LAYOUT.heartbeat("jobmaster.0123") == "clusterdeck/alpha/heartbeat/jobmaster/alpha.0123"


def test_an_endpoint_id_without_a_kind_stays_one_level():
    for endpoint_id in ("dispatcher", ".hidden", "trailing."):
        assert LAYOUT.rpc(endpoint_id) == f"clusterdeck/alpha/rpc/{endpoint_id}"


def test_a_taskexecutors_last_level_and_a_reply_topic_are_the_hosts_client_id():
    """What lets Mosquitto's ``%c`` bind them to one process (broker/acl.py)."""
    assert LAYOUT.rpc("taskexecutor.tm-1").rsplit("/", 1)[1] == LAYOUT.client_id("tm-1")
    assert LAYOUT.reply("client-1") == f"clusterdeck/alpha/reply/{LAYOUT.client_id('client-1')}"
    assert LAYOUT.presence("tm-1") == "clusterdeck/alpha/presence/tm-1"


@pytest.mark.parametrize("endpoint_id", ["resourcemanager", "taskexecutor.a.b.c",
                                         "jobmaster.x", ".hidden", "odd:id@host"])
def test_endpoint_topics_parse_back_to_their_endpoint(endpoint_id):
    assert LAYOUT.parse(LAYOUT.rpc(endpoint_id)) == ("rpc", endpoint_id)
    assert LAYOUT.parse(LAYOUT.heartbeat(endpoint_id)) == ("heartbeat", endpoint_id)


def test_reply_topics_parse_back_to_their_service():
    assert LAYOUT.parse(LAYOUT.reply("client-1.x")) == ("reply", "client-1.x")


@pytest.mark.parametrize("topic", [
    "clusterdeck/alpha/rpc/taskexecutor/beta.tm-1",   # another cluster's id in it
    "clusterdeck/alpha/reply/beta.client-1",
    "clusterdeck/alpha/reply/client-1",               # the old shape
    "clusterdeck/alpha/reply/alpha.",
    "clusterdeck/alpha/rpc/a/alpha.b/c",
    "clusterdeck/alpha/rpc",
])
def test_topics_of_no_endpoint_or_service_here_parse_to_none(topic):
    assert LAYOUT.parse(topic)[1] is None


def test_other_channels_parse_to_their_channel_only():
    assert LAYOUT.parse("clusterdeck/alpha/state/leader") == ("state", None)
