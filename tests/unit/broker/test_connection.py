import pytest

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.connection import (
    NoBrokerError,
    client_address,
    connection_file,
    read_connection,
    write_connection,
)
from clusterdeck.broker.credentials import load_or_create


def test_connection_round_trips_without_any_login(tmp_path):
    write_connection(tmp_path, "mosquitto", BrokerAddress("127.0.0.1", 1883, "u", "secret"))
    assert read_connection(tmp_path) == ("mosquitto", BrokerAddress("127.0.0.1", 1883))
    assert "secret" not in connection_file(tmp_path).read_text()


def test_no_connection_file_reads_as_none(tmp_path):
    assert read_connection(tmp_path) is None


def test_client_address_combines_the_file_with_the_role_login(tmp_path):
    credentials = load_or_create(tmp_path, "alpha")
    write_connection(tmp_path, "amqtt", BrokerAddress("127.0.0.1", 4321))
    address = client_address(tmp_path, "alpha", "taskmanager", "taskmanager-3")
    user, password = credentials.for_role("taskmanager", "taskmanager-3")
    assert address == BrokerAddress("127.0.0.1", 4321, user, password)


def test_client_address_of_an_unknown_cluster_names_it(tmp_path):
    with pytest.raises(NoBrokerError, match="no broker is known for cluster 'alpha'"):
        client_address(tmp_path, "alpha", "client")


def test_client_address_without_credentials_is_a_clear_error(tmp_path):
    write_connection(tmp_path, "mosquitto", BrokerAddress("127.0.0.1", 1883))
    with pytest.raises(NoBrokerError, match="no credentials"):
        client_address(tmp_path, "alpha", "client")


def test_a_malformed_connection_file_is_reported(tmp_path):
    connection_file(tmp_path).write_text("{not json")
    with pytest.raises(NoBrokerError, match="unreadable"):
        read_connection(tmp_path)


def test_an_unknown_cluster_names_the_clusters_started_here(tmp_path):
    (tmp_path / "default").mkdir()
    (tmp_path / "local").mkdir()
    write_connection(tmp_path / "local", "amqtt", BrokerAddress("127.0.0.1", 4321))
    with pytest.raises(NoBrokerError, match=r"--cluster \(local\)"):
        client_address(tmp_path / "default", "default", "client")
