import stat

import pytest

from clusterdeck.broker import mosquitto
from clusterdeck.broker.credentials import load_or_create
from clusterdeck.broker.limits import BrokerLimits
from clusterdeck.core.config.settings import Config

LIMITS = BrokerLimits(max_queued_messages=12345, max_inflight_messages=67,
                      message_size_limit=2000, max_packet_size=3000)


def conf(tmp_path, as_root=False):
    return mosquitto.config_text(host="127.0.0.1", port=18830,
                                 password_file=tmp_path / "p", acl_file=tmp_path / "a",
                                 limits=LIMITS, as_root=as_root)


def lines(text):
    return [line for line in text.splitlines() if not line.startswith("#")]


def test_config_sets_the_queue_limits_on_purpose(tmp_path):
    text = lines(conf(tmp_path))
    assert "max_queued_messages 12345" in text
    assert "max_inflight_messages 67" in text
    assert "message_size_limit 2000" in text
    assert "max_packet_size 3000" in text


def test_config_is_locked_down(tmp_path):
    text = lines(conf(tmp_path))
    for line in ("per_listener_settings false", "listener 18830 127.0.0.1",
                 "allow_anonymous false", f"password_file {tmp_path / 'p'}",
                 f"acl_file {tmp_path / 'a'}", "set_tcp_nodelay true", "persistence false",
                 "log_dest stdout"):
        assert line in text


def test_config_keeps_a_root_run_broker_root(tmp_path):
    assert "user root" in lines(conf(tmp_path, as_root=True))
    assert not any(line.startswith("user ") for line in lines(conf(tmp_path, as_root=False)))


def test_limits_from_config_sit_well_above_the_frame_size():
    limits = BrokerLimits.from_config(Config({"rpc.framesize": "1 MiB",
                                              "broker.max-queued-messages": 500}))
    assert limits.max_queued_messages == 500
    assert limits.message_size_limit >= 2 * 1024 * 1024
    assert limits.max_packet_size > limits.message_size_limit


def test_acl_confines_every_cluster_user_to_its_topics(tmp_path):
    credentials = load_or_create(tmp_path, "alpha")
    text = mosquitto.acl_text(credentials)
    for user in credentials.usernames():
        assert f"user {user}\ntopic readwrite clusterdeck/alpha/#\n" in text
    assert "pattern" not in text


@pytest.mark.skipif(not mosquitto.is_installed(), reason="mosquitto is not installed")
def test_password_file_is_private_and_holds_hashes_only(tmp_path):
    credentials = load_or_create(tmp_path, "alpha")
    path = tmp_path / "mosquitto.passwd"
    mosquitto.write_password_file(path, credentials)
    text = path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(line.split(":")[0] for line in text.splitlines()) == sorted(
        credentials.usernames())
    assert not any(password in text for _, password in credentials.items())

