"""Where a TaskManager's data service listens and what it announces: never loopback to
machines that cannot use it."""

from __future__ import annotations

import ipaddress

import pytest

from clusterdeck.core.config.settings import Config
from clusterdeck.core.taskmanager import dataplane
from clusterdeck.core.taskmanager.dataplane import data_service_address


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def test_a_cluster_on_loopback_keeps_its_data_on_loopback() -> None:
    assert data_service_address(Config({}), "127.0.0.1", 1883) == ("127.0.0.1", "127.0.0.1")


def test_a_taskmanager_of_another_machine_announces_its_address_towards_the_broker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dataplane, "_address_towards",
                        lambda host, _port: "10.0.0.7" if host == "10.0.0.1" else "?")
    assert data_service_address(Config({}), "10.0.0.1", 8883) == ("0.0.0.0", "10.0.0.7")


def test_one_beside_a_broker_bound_to_every_interface_announces_no_loopback_address(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """It reaches the broker on loopback; the other machines reach this one elsewhere."""
    monkeypatch.setattr(dataplane, "_address_towards", lambda host, _port: (
        "127.0.0.1" if is_loopback(host) else "192.168.1.20"))
    bind, announced = data_service_address(Config({"broker.bind": "0.0.0.0"}),
                                           "127.0.0.1", 8883)
    assert (bind, announced) == ("0.0.0.0", "192.168.1.20")


def test_a_host_set_by_hand_is_announced_as_it_is() -> None:
    config = Config({"broker.bind": "0.0.0.0", "taskmanager.data.host": "lab-2.local"})
    assert data_service_address(config, "127.0.0.1", 8883) == ("0.0.0.0", "lab-2.local")


def test_a_bind_address_given_is_the_one_announced() -> None:
    config = Config({"taskmanager.data.bind": "10.0.0.9"})
    assert data_service_address(config, "10.0.0.1", 8883) == ("10.0.0.9", "10.0.0.9")

