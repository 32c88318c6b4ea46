import stat

from pwdlib import PasswordHash
from pwdlib.hashers.argon2 import Argon2Hasher

from clusterdeck.broker import embedded
from clusterdeck.broker.credentials import load_or_create


def config_for(tmp_path, host="127.0.0.1"):
    credentials = load_or_create(tmp_path, "alpha")
    return credentials, embedded.broker_config(host=host, port=4321,
                                               password_file=tmp_path / "pw",
                                               credentials=credentials)


def test_the_only_listener_is_the_configured_one(tmp_path):
    _, config = config_for(tmp_path)
    assert config["listeners"] == {"default": {"type": "tcp", "bind": "127.0.0.1:4321"}}


def test_ipv6_hosts_are_bracketed(tmp_path):
    _, config = config_for(tmp_path, host="::1")
    assert config["listeners"]["default"]["bind"] == "[::1]:4321"


def test_logins_come_from_the_password_file_and_nothing_else(tmp_path):
    _, config = config_for(tmp_path)
    plugins = config["plugins"]
    assert plugins["amqtt.plugins.authentication.FileAuthPlugin"] == {
        "password_file": str(tmp_path / "pw")}
    assert not any("Anonymous" in name for name in plugins)


def test_every_login_gets_its_roles_topics_for_subscribe_and_publish(tmp_path):
    credentials, config = config_for(tmp_path)
    acl = config["plugins"]["clusterdeck.broker.amqttacl.ClusterTopicAcl"]
    assert config["plugins"]["clusterdeck.broker.amqttacl.ClusterWillCheck"] == acl
    assert set(acl) == {"subscribe", "publish"}
    assert set(acl["subscribe"]) == set(acl["publish"]) == set(credentials.usernames())
    assert acl["subscribe"]["cd-alpha-jobmanager"] == ["clusterdeck/alpha/#"]
    assert acl["publish"]["cd-alpha-observer"] == []
    assert "clusterdeck/alpha/rpc/taskexecutor/alpha.taskmanager-7/+" in \
        acl["subscribe"]["cd-alpha-taskmanager-7"]
    assert "clusterdeck/alpha/rpc/taskexecutor/alpha.taskmanager-7/+" not in \
        acl["subscribe"]["cd-alpha-taskmanager-8"]
    assert all(topic.startswith("clusterdeck/alpha/")
               for table in acl.values() for topics in table.values() for topic in topics)


def test_password_file_holds_argon2_hashes_readable_by_its_owner_only(tmp_path):
    credentials = load_or_create(tmp_path, "alpha")
    path = tmp_path / "amqtt.passwd"
    embedded.write_password_file(path, credentials)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    hashes = dict(line.split(":", 1) for line in path.read_text().splitlines())
    hasher = PasswordHash((Argon2Hasher(),))
    for user, password in credentials.items():
        assert hashes[user].startswith("$argon2")
        assert hasher.verify(password, hashes[user])


def test_a_subscription_made_while_the_topics_are_walked_breaks_neither_walk():
    # amqtt 0.12.1 walks its subscriptions across awaits (a broadcast, and a connecting
    # client's retained messages); a subscription made meanwhile must not end the walk.
    subscriptions = embedded._Subscriptions({"a": [], "b": []})
    for topic in subscriptions:
        subscriptions[topic + "/new"] = []
    for topic, _subscribers in subscriptions.items():
        subscriptions[topic + "/newer"] = []
    assert {"a", "b", "a/new", "b/new"} <= set(subscriptions)
    assert len(subscriptions) == 8
