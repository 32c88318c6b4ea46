"""Desktop habits (docs/desktop.md): a notification when a job ends while the window is not
in front, and a tray icon in the colour of the cluster's health.

A notification goes through the tray icon when the desktop has a tray, else straight to
the desktop's notification service on the session D-Bus (org.freedesktop.Notifications,
spoken with jeepney on a thread of its own: a bus that hangs must not hang the window).
Without either, and when sending fails, the window's status bar says it instead: a job's
end is never told nowhere. Only jobs seen running get one: the results a cluster keeps
of its earlier jobs, and those of an opened recording, arrive ended.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QMainWindow, QMenu, QSystemTrayIcon

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.models.formatting import format_duration
from clusterdeck.gui.models.health import ClusterHealth, Health
from clusterdeck.gui.views.trayicon import health_icon

log = logging.getLogger(__name__)
WATCHED = 10_000  # jobs followed for their end at most
SENT_KEPT = 50
_SERVICE = "org.freedesktop.Notifications"


def dbus_notify(summary: str, body: str, critical: bool = False) -> None:
    """One notification to the desktop's notification service (blocking, up to 3 s);
    raises what went wrong."""
    from jeepney import DBusAddress, new_method_call
    from jeepney.io.blocking import open_dbus_connection

    address = DBusAddress("/org/freedesktop/Notifications", bus_name=_SERVICE,
                          interface=_SERVICE)
    hints = {"urgency": ("y", 2 if critical else 1), "desktop-entry": ("s", "clusterdeck")}
    call = new_method_call(address, "Notify", "susssasa{sv}i",
                           ("clusterdeck", 0, "", summary, body, [], hints, 10_000))
    with open_dbus_connection(bus="SESSION") as connection:
        reply = connection.send_and_get_reply(call, timeout=3.0)
    if reply.header.message_type.name == "error":
        raise RuntimeError(f"the notification service refused it: {reply.body}")


class DesktopNotifier(QObject):
    """Fed by the window: job snapshots and results, the cluster's health."""

    sent = Signal(str, str, str)  # (summary, body, how: "tray", "desktop" or "window")

    def __init__(self, window: QMainWindow, notice: Callable[[str], None],
                 call_on_gui_thread: Callable[[Callable[[], None]], None],
                 send: Callable[[str, str, bool], None] = dbus_notify,
                 with_tray: bool | None = None) -> None:
        super().__init__(window)
        self.window = window
        self._notice = notice
        self._on_gui = call_on_gui_thread
        self._send = send
        self._running: dict[str, None] = {}  # insertion-ordered, bounded
        self.history: deque[tuple[str, str, str]] = deque(maxlen=SENT_KEPT)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="clusterdeck-notify")
        self.health = ClusterHealth(Health.NONE, "no cluster")
        self.tray: QSystemTrayIcon | None = None
        if QSystemTrayIcon.isSystemTrayAvailable() if with_tray is None else with_tray:
            self.tray = self._make_tray()
        self.sent.connect(self._remember_sent)

    # -- the window feeds these --------------------------------------------------------------

    def job_seen(self, job_id: str, snapshot: JobGraphSnapshot) -> None:
        if not snapshot.status.is_terminal and job_id not in self._running:
            self._running[job_id] = None
            while len(self._running) > WATCHED:
                self._running.pop(next(iter(self._running)))

    def job_ended(self, job_id: str, result: p.JobResult) -> None:
        if not result.status.is_terminal or job_id not in self._running:
            return
        del self._running[job_id]
        if self.in_front():
            return
        failed = result.status is JobStatus.FAILED
        duration = f" after {format_duration(result.duration)}" \
            if result.duration is not None else ""
        cause = result.root_cause or {}
        body = f"{result.name} ({job_id}) {str(result.status).lower()}{duration}" + (
            f": {cause.get('exception_type', '')}: {cause.get('message', '')}"
            if failed and cause else "")
        self.notify(f"Job {result.status}", body, critical=failed)

    def set_health(self, health: ClusterHealth) -> None:
        if health == self.health:
            return
        self.health = health
        if self.tray is not None:
            self.tray.setIcon(health_icon(health.level))
            self.tray.setToolTip(f"clusterdeck \u2014 {health.text}")

    def in_front(self) -> bool:
        window = self.window
        return window.isVisible() and window.isActiveWindow() and not window.isMinimized()

    def notify(self, summary: str, body: str, critical: bool = False) -> None:
        tray = self.tray
        if tray is not None and tray.isVisible() and tray.supportsMessages():
            icon = QSystemTrayIcon.MessageIcon.Critical if critical else \
                QSystemTrayIcon.MessageIcon.Information
            tray.showMessage(summary, body, icon, 10_000)
            self.sent.emit(summary, body, "tray")
            return

        def send() -> None:  # the notifier's thread
            try:
                self._send(summary, body, critical)
            except Exception as error:  # no desktop service: the window says it instead
                log.debug("desktop notification failed", exc_info=True)
                why = f"{type(error).__name__}: {error}"
                self._on_gui(lambda: self._in_window(summary, body, why))
                return
            self._on_gui(lambda: self.sent.emit(summary, body, "desktop"))
        self._executor.submit(send)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self.tray is not None:
            self.tray.hide()

    def _in_window(self, summary: str, body: str, why: str) -> None:
        self._notice(f"{summary}: {body} (no desktop notification: {why})")
        self.sent.emit(summary, body, "window")

    def _remember_sent(self, summary: str, body: str, how: str) -> None:
        self.history.append((summary, body, how))

    def _make_tray(self) -> QSystemTrayIcon:
        tray = QSystemTrayIcon(health_icon(Health.NONE), self)
        tray.setToolTip("clusterdeck \u2014 no cluster")
        menu = QMenu()
        menu.addAction("Show clusterdeck", self._raise_window)
        tray.setContextMenu(menu)
        self._menu = menu  # the tray does not own it
        tray.activated.connect(self._on_tray_activated)
        tray.show()
        return tray

    def _on_tray_activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason is QSystemTrayIcon.ActivationReason.Trigger:
            self._raise_window()

    def _raise_window(self) -> None:
        self.window.showNormal()
        self.window.setWindowState(self.window.windowState() & ~Qt.WindowState.WindowMinimized)
        self.window.raise_()
        self.window.activateWindow()
