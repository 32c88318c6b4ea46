"""The network IO thread: one asyncio event loop on a thread of its own.

Every socket of the data plane (the server's listening socket, the connections it
accepted, an input gate's connections) belongs to one of these and is touched only on its
thread; a TaskManager shares one between its ChannelServer and its tasks' input gates, as
Flink's TaskManager shares its Netty event loops. Other threads reach it only through
``call_soon`` and ``run``; its callbacks must never block.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class IoLoop:
    """The loop and its thread; started by the constructor, ended by ``stop``."""

    def __init__(self, name: str = "stream-network") -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(_log_exception)
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """On the IO thread: until ``stop``."""
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            # What is still waiting (a consumer's connect between its retries) ends here.
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.close()

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def call_soon(self, callback: Callable[..., object], *args: Any) -> None:
        """From any thread: run ``callback(*args)`` on the IO thread. Dropped once the
        loop stopped (what it would have done, closing or sending, has no socket left)."""
        if self._stopped:
            return
        with contextlib.suppress(RuntimeError):  # closed between the check and the call
            self.loop.call_soon_threadsafe(callback, *args)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """From another thread: run ``coroutine`` on the IO thread and wait for its result."""
        if self._stopped:
            coroutine.close()
            raise RuntimeError("the network IO loop was stopped")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """From any thread but the IO thread: end the loop and wait for its thread."""
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)


def _log_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """A callback that raised is a bug here, not a peer's fault (those are handled where
    they arrive): log it loudly, keep serving every other connection."""
    log.error("stream network: %s", context.get("message"), exc_info=context.get("exception"))
