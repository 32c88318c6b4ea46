import base64
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


def test_acl_gives_each_role_its_rules_from_the_table(tmp_path):
    credentials = load_or_create(tmp_path, "alpha")
    text = mosquitto.acl_text(credentials)
    assert "user cd-alpha-jobmanager\ntopic read clusterdeck/alpha/#\n" \
        "topic write clusterdeck/alpha/#\n" in text
    assert "pattern read clusterdeck/alpha/reply/alpha.client/%c/+" in text
    assert "user cd-alpha-taskmanager-64\n" in text
    assert "readwrite" not in text
    observer = text[text.index("user cd-alpha-observer"):].split("\n\n")[0]
    assert not any(line.startswith("topic write") for line in observer.splitlines())


def test_password_hash_is_mosquitto_2_pbkdf2_sha512():
    """A line mosquitto_passwd 2.0.11 wrote for password "secret" (salt from it)."""
    written = ("$7$101$hbJTAweuZ0Gwg/fv$cQAGHl4YriGfkw7Wjp0VJY/3CU2+tn4DJDYKicGBACEYVIv9l/"
               "kOYYyQwPX9KZnmhZWMFL+tvYgcOz8IPrC6Xg==")
    salt = base64.b64decode(written.split("$")[3])
    assert mosquitto.password_hash("secret", salt=salt) == written


def test_password_hashes_get_a_fresh_twelve_byte_salt_each():
    first, second = (mosquitto.password_hash("secret") for _ in range(2))
    assert first != second
    _, kind, iterations, salt, digest = first.split("$")
    assert (kind, iterations) == ("7", "101")
    assert len(base64.b64decode(salt)) == 12 and len(base64.b64decode(digest)) == 64
    with pytest.raises(ValueError):
        mosquitto.password_hash("secret", salt=b"short")


def test_password_file_is_private_and_holds_hashes_only(tmp_path):
    credentials = load_or_create(tmp_path, "alpha")
    path = tmp_path / "mosquitto.passwd"
    mosquitto.write_password_file(path, credentials)
    text = path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(line.split(":")[0] for line in text.splitlines()) == sorted(
        credentials.usernames())
    assert all(line.split(":", 1)[1].startswith("$7$101$") for line in text.splitlines())
    assert not any(password in text for _, password in credentials.items())


def test_mosquitto_passwd_is_not_needed(monkeypatch):
    """It took each password on its command line; the file is written in Python now."""
    monkeypatch.setattr(mosquitto, "find_binary",
                        lambda name="mosquitto": None if name == "mosquitto_passwd"
                        else mosquitto.Path("/usr/sbin/mosquitto"))
    assert mosquitto.is_installed()
