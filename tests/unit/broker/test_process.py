import socket

import pytest

from clusterdeck.broker import mosquitto
from clusterdeck.broker import server as process
from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.connection import write_connection
from clusterdeck.core.config.settings import Config


def test_external_kind_has_nothing_to_run():
    with pytest.raises(process.BrokerStartError, match="no broker to run"):
        process.resolve_kind("external")


def test_auto_prefers_mosquitto_when_installed(monkeypatch):
    monkeypatch.setattr(mosquitto, "is_installed", lambda: True)
    assert process.resolve_kind("auto") == "mosquitto"


def test_auto_falls_back_to_amqtt_with_a_one_line_notice(monkeypatch, capsys):
    monkeypatch.setattr(mosquitto, "is_installed", lambda: False)
    assert process.resolve_kind("auto") == "amqtt"
    notice = capsys.readouterr().err
    assert "amqtt" in notice
    assert notice.count("\n") == 1


def test_asking_for_a_missing_mosquitto_is_an_error(monkeypatch):
    monkeypatch.setattr(mosquitto, "is_installed", lambda: False)
    with pytest.raises(process.BrokerStartError, match="not installed"):
        process.resolve_kind("mosquitto")


def test_pick_free_port_returns_a_bindable_port():
    port = process.pick_free_port("127.0.0.1")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))


def test_a_picked_port_is_below_the_range_outgoing_connections_take_theirs_from():
    """The kernel could give a port of that range to any client socket of the machine
    between the pick and the broker's bind."""
    ports = {process.pick_free_port("127.0.0.1") for _ in range(20)}
    assert all(process.PORTS_FROM <= port < process._ephemeral_start() for port in ports)
    assert len(ports) > 1  # picked at random, so that two clusters seldom collide


def test_a_configured_port_is_used_as_is(tmp_path):
    config = Config({"broker.port": 5555})
    assert process.choose_port(config, tmp_path) == 5555


def test_port_zero_reuses_the_last_port_of_the_cluster(tmp_path):
    port = process.pick_free_port("127.0.0.1")
    write_connection(tmp_path, "amqtt", BrokerAddress("127.0.0.1", port))
    assert process.choose_port(Config(), tmp_path) == port


def test_port_zero_picks_another_port_when_the_last_one_is_taken(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        write_connection(tmp_path, "amqtt", BrokerAddress("127.0.0.1", taken))
        assert process.choose_port(Config(), tmp_path) != taken


def test_run_broker_refuses_the_external_kind_before_writing_anything(tmp_path):
    with pytest.raises(process.BrokerStartError):
        process.run_broker(Config({"broker.kind": "external"}), tmp_path / "c")
    assert not (tmp_path / "c").exists()
