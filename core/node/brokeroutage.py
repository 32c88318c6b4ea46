"""What a process does while its broker connection stays broken.

paho reconnects by itself, with a back-off bounded by broker/client.py's
``RECONNECT_MAX_DELAY``, for as long as its network thread lives. Past
``broker.reconnect-timeout`` a process under a supervisor exits (code 11) to be started
afresh, which also mends a connection whose network thread died. A TaskManager started by
hand on another machine has nothing to start it again: after a network cut longer than
that timeout it would be lost for good. It keeps reconnecting instead, and says so in its
log at growing intervals (doubling, at most ``MAX_REPORT_INTERVAL`` apart); the broker's
fencing already keeps it from acting on anything stale when it is back (it registers
again, and JobMasters refuse its old attempts). Only when its network thread died, so
that nothing reconnects it, does it exit too.

Pure and clock-free (``now`` passed in); used by the process's own main thread.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

MAX_REPORT_INTERVAL = 300.0


class BrokerOutage:
    """How long the connection has been broken, and whether the process should exit."""

    def __init__(self, reconnect_timeout: float, keep_reconnecting: bool) -> None:
        """``reconnect_timeout``: 0 never exits; ``keep_reconnecting``: no supervisor
        would start this process again, so it exits only if nothing reconnects it."""
        self.reconnect_timeout = reconnect_timeout
        self.keep_reconnecting = keep_reconnecting
        self._since: float | None = None
        self._next_report = reconnect_timeout  # seconds into the outage

    def should_exit(self, now: float, serving: bool, reconnecting: bool) -> bool:
        """``serving``: connected, its network thread alive; ``reconnecting``: not
        connected, and that thread alive (paho keeps trying)."""
        if serving or self.reconnect_timeout <= 0:
            if self._since is not None and now - self._since >= self.reconnect_timeout > 0:
                log.warning("the broker connection is back after %.0f s", now - self._since)
            self._since = None
            self._next_report = self.reconnect_timeout
            return False
        if self._since is None:
            self._since = now
        broken = now - self._since
        if broken < self.reconnect_timeout:
            return False
        if not self.keep_reconnecting:
            log.critical("the broker connection stayed broken for %.0f s "
                         "(broker.reconnect-timeout): exiting to be started again", broken)
            return True
        if not reconnecting:
            log.critical("the broker connection is broken and its network thread ended, "
                         "so nothing reconnects it: exiting")
            return True
        if broken >= self._next_report:
            self._next_report = min(2 * broken, broken + MAX_REPORT_INTERVAL)
            log.warning("the broker connection has been broken for %.0f s "
                        "(broker.reconnect-timeout %.0f s); no supervisor would start this "
                        "process again, so it keeps reconnecting (next report after %.0f s)",
                        broken, self.reconnect_timeout, self._next_report)
        return False
