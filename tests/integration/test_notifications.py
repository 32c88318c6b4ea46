"""A job-end notification reaches a desktop notification service over a real session
D-Bus (gui/controllers/tray.py's dbus_notify): a dbus-daemon started here, and a service that owns
org.freedesktop.Notifications and records what it is told, as a desktop's would."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

import pytest
from jeepney import HeaderFields, MessageType, new_method_return
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

from clusterdeck.gui.controllers.tray import dbus_notify

pytestmark = pytest.mark.integration


@pytest.fixture
def session_bus(monkeypatch):
    daemon = shutil.which("dbus-daemon")
    assert daemon, "dbus-daemon is installed by scripts/setup.sh"
    process = subprocess.Popen([daemon, "--session", "--nofork", "--print-address=1"],
                               stdout=subprocess.PIPE, text=True)
    try:
        address = process.stdout.readline().strip()
        assert address.startswith("unix:")
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
        yield address
    finally:
        process.kill()
        process.wait(10)


def serve_notifications(told: list[tuple], ready: threading.Event) -> None:
    with open_dbus_connection(bus="SESSION") as connection:
        connection.send_and_get_reply(message_bus.RequestName(
            "org.freedesktop.Notifications"), timeout=5)
        ready.set()
        while True:
            message = connection.receive(timeout=20)
            if message.header.message_type is not MessageType.method_call:
                continue
            if message.header.fields.get(HeaderFields.member) == "Notify":
                told.append((message.header.fields.get(HeaderFields.signature),
                             *message.body))
                connection.send(new_method_return(message, "u", (7,)))
                return


def test_a_notification_reaches_the_desktops_service(session_bus):
    told: list[tuple] = []
    ready = threading.Event()
    service = threading.Thread(target=serve_notifications, args=(told, ready), daemon=True)
    service.start()
    assert ready.wait(10)

    dbus_notify("Job FAILED", "wordcount (j1) failed after 12.5 s", critical=True)

    service.join(10)
    [(signature, app, replaces, _icon, summary, body, actions, hints, timeout)] = told
    assert signature == "susssasa{sv}i"
    assert (app, replaces, summary, body, actions) == (
        "clusterdeck", 0, "Job FAILED", "wordcount (j1) failed after 12.5 s", [])
    assert hints["urgency"] == ("y", 2) and timeout == 10_000


def test_with_no_service_on_the_bus_the_failure_is_raised(session_bus):
    with pytest.raises(RuntimeError, match=r"refused it.*not provided"):
        dbus_notify("Job FINISHED", "wordcount finished")


def test_with_no_session_bus_at_all_the_failure_is_raised(monkeypatch):
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", os.devnull)
    with pytest.raises(Exception):  # noqa: B017 (jeepney names no type of its own)
        dbus_notify("Job FINISHED", "wordcount finished")
