"""LocalRpcService: an in-process transport for fast unit tests of endpoint logic.

It is a real alternative transport, not a mock of MQTT: envelopes are encoded and
decoded exactly as on the wire, retained topics and wildcards behave as on a broker.
Several services on one LocalBus talk to each other as processes on one broker would.
"""

from __future__ import annotations

import threading
from typing import Any

from clusterdeck.core.rpc._service import EventCallback, RpcService
from clusterdeck.core.rpc._topics import topic_matches


class LocalBus:
    def __init__(self) -> None:
        self._services: dict[str, LocalRpcService] = {}
        self._retained: dict[str, bytes] = {}
        self._subscriptions: list[tuple[str, LocalRpcService, EventCallback, bool]] = []
        self._lock = threading.Lock()

    def attach(self, service: LocalRpcService) -> None:
        with self._lock:
            self._services[service.service_id] = service

    def detach(self, service: LocalRpcService) -> None:
        with self._lock:
            self._services.pop(service.service_id, None)
            self._subscriptions = [s for s in self._subscriptions if s[1] is not service]

    def host_of(self, endpoint_id: str) -> LocalRpcService | None:
        with self._lock:
            services = list(self._services.values())
        return next((s for s in services if s.endpoint(endpoint_id) is not None), None)

    def service(self, service_id: str) -> LocalRpcService | None:
        with self._lock:
            return self._services.get(service_id)

    def publish(self, topic: str, data: bytes, retained: bool) -> None:
        with self._lock:
            if retained:
                self._retained[topic] = data
            receivers = [(s, cb, decoded) for f, s, cb, decoded in self._subscriptions
                         if topic_matches(f, topic)]
        for service, callback, decoded in receivers:
            callback(topic, service.decode_event(data) if decoded else data)

    def clear_retained(self, topic: str) -> None:
        with self._lock:
            self._retained.pop(topic, None)

    def unsubscribe(self, topic_filter: str, callback: EventCallback) -> None:
        with self._lock:
            self._subscriptions = [s for s in self._subscriptions
                                   if (s[0], s[2]) != (topic_filter, callback)]

    def subscribe(self, topic_filter: str, service: LocalRpcService,
                  callback: EventCallback, decoded: bool = True) -> None:
        with self._lock:
            self._subscriptions.append((topic_filter, service, callback, decoded))
            retained = [(t, d) for t, d in self._retained.items() if topic_matches(topic_filter, t)]
        for topic, data in retained:
            callback(topic, service.decode_event(data) if decoded else data)


class LocalRpcService(RpcService):
    def __init__(self, bus: LocalBus | None = None, service_id: str | None = None,
                 **options: Any) -> None:
        super().__init__(service_id, **options)
        self.bus = bus or LocalBus()
        self.bus.attach(self)

    def _transmit(self, target: str, data: bytes, *, heartbeat: bool) -> None:
        host = self.bus.host_of(target)
        if host is not None:  # like MQTT: a message to nobody is simply lost
            host._receive(target, data)

    def _transmit_reply(self, reply_to: str, data: bytes) -> None:
        service = self.bus.service(reply_to)
        if service is not None:
            service._receive(None, data)

    def publish(self, topic: str, message: Any, *, retained: bool = False, qos: int = 1) -> None:
        self.bus.publish(topic, self.encode_event(message), retained)

    def subscribe(self, topic_filter: str, callback: EventCallback, *,
                  decoded: bool = True) -> None:
        self.bus.subscribe(topic_filter, self, callback, decoded)

    def unsubscribe(self, topic_filter: str, callback: EventCallback) -> None:
        self.bus.unsubscribe(topic_filter, callback)

    def clear_retained(self, topic: str) -> None:
        self.bus.clear_retained(topic)

    def close(self) -> None:
        super().close()
        self.bus.detach(self)
