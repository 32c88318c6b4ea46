"""RpcEndpoint: one main thread, one FIFO mailbox, state touched only on that thread.

Handlers are methods marked with ``@handler(MessageType)``. A handler runs on the main
thread and returns the answer to an ask (a message, None, or a Future of one); raising
answers the ask with a RemoteError. A handler may say whom it takes its message from
(``senders``, ``sender_field``): where the transport vouches for the sender (MQTT, whose
broker binds each identity to a login), anyone else gets a SenderMismatchError.
Everything else an endpoint does (timers, callbacks of futures, results of worker
threads) comes back to the main thread through ``run_async``.

"Main thread" is one at a time, as in Flink's actors: whichever thread holds the
endpoint's mailbox runs it. That is the endpoint's own thread, except that a transport's
thread (paho's network thread) which delivers a message to an idle endpoint runs it
there and then, up to INLINE_ITEMS, instead of waking the endpoint's thread: the wake-up
was most of what a round trip cost above bare paho (docs/benchmarks.md section 1).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import traceback
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from clusterdeck.core.rpc._errors import (
    EndpointStoppedError,
    FencingTokenMismatchError,
    NotMainThreadError,
    RefusedMessageError,
    RemoteError,
    SenderMismatchError,
)
from clusterdeck.core.rpc._topics import sent_by

if TYPE_CHECKING:
    from clusterdeck.core.rpc._service import RpcService
    from clusterdeck.core.rpc._timers import ScheduledCall

log = logging.getLogger(__name__)
T = TypeVar("T")
Reply = Callable[[Any, BaseException | None], None]


@dataclass(frozen=True)
class _Handler:
    method: str
    fenced: bool
    senders: tuple[str, ...]
    sender_field: str


def handler(message_type: type, *, fenced: bool = True, senders: tuple[str, ...] = (),
            sender_field: str = "") -> Callable[[T], T]:
    """Mark a method as the handler of ``message_type``.

    ``senders``: the identities (or shared identities, such as ``client``) it takes the
    message from; ``sender_field``: a field of the message that must name its sender (a
    TaskManager speaks only for itself). Both hold only where the transport vouches for
    the sender; in-process, every sender is trusted.

    ``fenced=False`` lets a message through a FencedRpcEndpoint without a token: for the
    calls that hand the token out (registration) or that anyone may make (overviews).
    """
    def mark(method: T) -> T:
        method.__rpc_handles__ = (  # type: ignore[attr-defined]
            message_type, _Handler(method.__name__, fenced, senders,  # type: ignore[attr-defined]
                                   sender_field))
        return method
    return mark


@dataclass(frozen=True)
class Invocation:
    """A received message on its way through the mailbox."""

    message: Any
    sender: str
    fencing_token: str | None = None
    reply: Reply | None = None
    verified: bool = False  # the transport vouches that ``sender`` sent it


_STOP = object()
INLINE_ITEMS = 64  # a transport's thread runs at most this many before handing over

# Per thread: whether it is a transport's thread, which may run an idle endpoint's
# mailbox itself, and whether it is running one now (never two nested).
_here = threading.local()


@contextlib.contextmanager
def transport_thread() -> Iterator[None]:
    """Mark the current thread as a transport's, for the time of one delivery."""
    _here.transport = True
    try:
        yield
    finally:
        _here.transport = False


class RpcEndpoint:
    """Base of every endpoint (ResourceManager, Dispatcher, JobMaster, TaskExecutor, ...)."""

    _rpc_handlers: dict[type, _Handler] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        clashes = sorted(set(vars(cls)) & _MACHINERY)
        if clashes:  # an override would silently stop the mailbox (it happened once)
            raise TypeError(f"{cls.__name__} redefines {', '.join(clashes)} of RpcEndpoint's "
                            "mailbox machinery: name it otherwise")
        handlers = dict(cls._rpc_handlers)
        for member in vars(cls).values():
            marked = getattr(member, "__rpc_handles__", None)
            if marked:
                handlers[marked[0]] = marked[1]
        cls._rpc_handlers = handlers

    def __init__(self, endpoint_id: str) -> None:
        self.endpoint_id = endpoint_id
        self._mailbox: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()   # something is in the mailbox
        self._claim = threading.Lock()   # held by the thread that runs the mailbox
        self._owner: int | None = None   # that thread's ident, while it runs it
        self._started = False            # on_start ran: a transport's thread may run it
        self._thread = threading.Thread(target=self._run, name=f"endpoint-{endpoint_id}",
                                        daemon=True)
        self._service: RpcService | None = None
        self._terminated: Future[None] = Future()
        self._stopping = False
        # Who sent the message being handled, when the transport vouches for it; main
        # thread only, like all endpoint state.
        self.sender: str | None = None

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def rpc_service(self) -> RpcService:
        if self._service is None:
            raise RuntimeError(f"endpoint {self.endpoint_id} is not started")
        return self._service

    def _start(self, service: RpcService) -> None:
        """Called by the service; ``on_start`` then runs first on the main thread."""
        self._service = service
        self._thread.start()
        self.run_async(self._rpc_on_start)

    def _rpc_on_start(self) -> None:
        """The endpoint's own thread, first: only then may a transport's thread run it.
        (Named apart from what subclasses name their own methods.)"""
        self._safely(self.on_start)
        self._started = True

    def on_start(self) -> None:
        """Runs on the main thread before any message."""

    def on_stop(self) -> None:
        """Runs on the main thread after the last message it will handle."""

    def stop(self) -> Future[None]:
        """Ask the endpoint to stop; messages still in the mailbox fail loudly."""
        if not self._stopping:
            self._stopping = True
            self._put(_STOP)
        return self._terminated

    @property
    def terminated(self) -> Future[None]:
        return self._terminated

    # -- main thread ---------------------------------------------------------------------

    def is_main_thread(self) -> bool:
        return self._owner == threading.get_ident()

    def validate_main_thread(self) -> None:
        if not self.is_main_thread():
            raise NotMainThreadError(
                f"{type(self).__name__} {self.endpoint_id}: called from thread "
                f"{threading.current_thread().name!r}, not from its main thread")

    def run_async(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the main thread, after what is already in the mailbox."""
        self._put((fn, args, None))

    def call_async(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Like run_async, with the result (or the exception) in a Future."""
        future: Future[T] = Future()
        self._put((fn, args, future))
        return future

    def schedule(self, delay: float, fn: Callable[..., Any], *args: Any) -> ScheduledCall:
        """Run ``fn(*args)`` on the main thread after ``delay`` seconds."""
        return self.rpc_service.scheduler.schedule(delay, lambda: self.run_async(fn, *args))

    def on_main_thread(self, future: Future[T],
                       callback: Callable[[T | None, BaseException | None], None]) -> None:
        """Call ``callback(result, error)`` on the main thread once ``future`` is done."""
        def done(f: Future[T]) -> None:
            error = f.exception()
            self.run_async(callback, None if error else f.result(), error)
        future.add_done_callback(done)

    def run_in_worker(self, fn: Callable[..., T], *args: Any,
                      name: str = "worker") -> Future[T]:
        """Run blocking ``fn`` on a fresh thread; the Future completes there."""
        future: Future[T] = Future()

        def work() -> None:
            try:
                future.set_result(fn(*args))
            except BaseException as error:
                future.set_exception(error)
        threading.Thread(target=work, name=f"{self.endpoint_id}-{name}", daemon=True).start()
        return future

    # -- delivery ------------------------------------------------------------------------

    def _deliver(self, invocation: Invocation) -> None:
        """Called from the transport's thread."""
        self._put(invocation)

    def _put(self, item: Any) -> None:
        """Into the mailbox, from any thread. A transport's thread runs an idle endpoint's
        mailbox itself; the thread running it now finds the item in its own loop."""
        self._mailbox.append(item)
        if self._owner == threading.get_ident():
            return
        if self._started and not self._stopping and getattr(_here, "transport", False) \
                and not getattr(_here, "running", False) \
                and self._claim.acquire(blocking=False):
            try:
                self._drain(INLINE_ITEMS)
            finally:
                self._claim.release()
            if not self._mailbox:
                return
        self._wake.set()

    def _run(self) -> None:
        stopped = False
        while not stopped:
            self._wake.wait()
            self._wake.clear()
            with self._claim:
                stopped = self._drain(None)
        with self._claim:
            self._owner = threading.get_ident()
            self._safely(self.on_stop)
            self._fail_remaining()
            self._owner = None
        self._terminated.set_result(None)

    def _drain(self, most: int | None) -> bool:
        """Run the mailbox (its claim held) until it is empty or ``most`` items ran; True
        once the stop is reached, which only the endpoint's own thread acts on."""
        own = threading.current_thread() is self._thread
        self._owner, _here.running = threading.get_ident(), True
        try:
            ran = 0
            while most is None or ran < most:
                try:
                    item = self._mailbox.popleft()
                except IndexError:
                    return False
                if item is _STOP:
                    if own:
                        return True
                    self._mailbox.appendleft(item)
                    return False
                try:
                    self._process(item)
                except Exception:  # the mailbox loop must outlive any one message
                    log.exception("%s: failed to process a mailbox item", self.endpoint_id)
                ran += 1
            return False
        finally:
            self._owner, _here.running = None, False

    def _process(self, item: Any) -> None:
        if isinstance(item, Invocation):
            self._handle(item)
            return
        fn, args, future = item
        if future is None:
            self._safely(fn, *args)
            return
        try:
            future.set_result(fn(*args))
        except BaseException as error:
            future.set_exception(error)

    def _safely(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as error:
            self._unhandled(error, getattr(fn, "__name__", "a callback"))

    def on_unhandled_error(self, error: Exception, context: str) -> None:
        """Main thread: an exception escaped a tell's handler or a callback, so no asker
        hears of it. An endpoint overrides this to fail what it concerned (a JobMaster
        fails its job); the default can only log it."""
        log.error("%s: unhandled error in %s", self.endpoint_id, context, exc_info=error)

    def _unhandled(self, error: Exception, context: str) -> None:
        try:
            self.on_unhandled_error(error, context)
        except Exception:  # the mailbox loop must outlive a failing error handler too
            log.exception("%s: handling an unhandled error failed", self.endpoint_id)
            log.error("%s: the unhandled error was in %s", self.endpoint_id, context,
                      exc_info=error)

    def _handle(self, invocation: Invocation) -> None:
        try:
            result = self._invoke(invocation)
        except FencingTokenMismatchError as error:
            if invocation.reply is None:
                log.warning("%s: %s", self.endpoint_id, error)
            else:
                invocation.reply(None, _as_remote(error))
            return
        except Exception as error:
            if invocation.reply is not None:
                invocation.reply(None, _as_remote(error))
            elif isinstance(error, RefusedMessageError):  # the sender's fault, not ours
                log.warning("%s: refused %s from %s: %s", self.endpoint_id,
                            type(invocation.message).__name__, invocation.sender, error)
            else:
                self._unhandled(error, f"handling {type(invocation.message).__name__}")
            return
        if invocation.reply is None:
            return
        if isinstance(result, Future):
            reply = invocation.reply
            result.add_done_callback(
                lambda f: reply(None, _as_remote(f.exception())) if f.exception()
                else reply(f.result(), None))
        else:
            invocation.reply(result, None)

    def _invoke(self, invocation: Invocation) -> Any:
        entry = self._rpc_handlers.get(type(invocation.message))
        if entry is None:
            raise TypeError(f"{type(self).__name__} does not handle "
                            f"{type(invocation.message).__name__}")
        self._check_fencing(invocation, entry.fenced)
        self.sender = invocation.sender if invocation.verified else None
        try:
            _check_sender(invocation, entry)
            return getattr(self, entry.method)(invocation.message)
        finally:
            self.sender = None

    def _check_fencing(self, invocation: Invocation, fenced: bool) -> None:
        """Plain endpoints accept everything; FencedRpcEndpoint overrides this."""

    def _fail_remaining(self) -> None:
        while True:
            try:
                item = self._mailbox.popleft()
            except IndexError:
                return
            error = EndpointStoppedError(f"endpoint {self.endpoint_id} stopped")
            if isinstance(item, Invocation) and item.reply is not None:
                item.reply(None, _as_remote(error))
            elif isinstance(item, tuple) and item[2] is not None:
                item[2].set_exception(error)


# RpcEndpoint's own private methods; subclasses override only the fencing check.
_MACHINERY = frozenset(name for name, member in vars(RpcEndpoint).items()
                       if name.startswith("_") and not name.startswith("__")
                       and callable(member)) - {"_check_fencing"}


class FencedRpcEndpoint(RpcEndpoint):
    """An endpoint of a leader: fenced messages must carry this leader's token.

    A restarted JobManager gets a new token, so late messages of a zombie TaskManager,
    addressed to the old leader, are refused instead of corrupting the new one's state.
    """

    def __init__(self, endpoint_id: str, fencing_token: str | None = None) -> None:
        super().__init__(endpoint_id)
        self.fencing_token = fencing_token or uuid.uuid4().hex

    def _check_fencing(self, invocation: Invocation, fenced: bool) -> None:
        if fenced and invocation.fencing_token != self.fencing_token:
            raise FencingTokenMismatchError(
                f"{type(invocation.message).__name__} to {self.endpoint_id} carried fencing "
                f"token {invocation.fencing_token!r}, the leader's is {self.fencing_token!r}")


def _check_sender(invocation: Invocation, entry: _Handler) -> None:
    if not invocation.verified:
        return
    name = type(invocation.message).__name__
    if entry.senders and not any(sent_by(s, invocation.sender) for s in entry.senders):
        raise SenderMismatchError(f"{name} is not taken from {invocation.sender!r} (only "
                                  f"from {', '.join(entry.senders)})")
    claimed = getattr(invocation.message, entry.sender_field, None) if entry.sender_field \
        else invocation.sender
    if claimed != invocation.sender:
        raise SenderMismatchError(f"{invocation.sender!r} sent {name} for {claimed!r}: a "
                                  "process speaks only for itself")


def _as_remote(error: BaseException | None) -> BaseException | None:
    if error is None or isinstance(error, RemoteError):
        return error
    text = "".join(traceback.format_exception(error))
    return RemoteError(type(error).__name__, str(error), text)
