"""Queue and size limits the cluster's broker is given on purpose.

Mosquitto's defaults (1000 queued, 20 in flight per client) drop QoS 1 messages
silently when a subscriber falls behind, while the publisher still gets its PUBACK.
The queue is therefore raised to ``broker.max-queued-messages``. Sizes sit well above
``rpc.framesize``: the runtime refuses oversized messages at the sender with a clear
error, and the broker's own limit only stops what is clearly not clusterdeck traffic
(past ``max_packet_size`` a 3.1.1 client is disconnected without being told why).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

HEADER_ALLOWANCE = 64 * 1024
"""Room for the topic (at most 64 KiB) and the fixed and variable headers."""

MOSQUITTO_SIZE_CEILING = 268_435_455
"""The largest packet MQTT 3.1.1 can encode; Mosquitto refuses anything larger."""


@dataclass(frozen=True)
class BrokerLimits:
    max_queued_messages: int
    max_inflight_messages: int
    message_size_limit: int
    max_packet_size: int

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BrokerLimits:
        framesize = int(config["rpc.framesize"])
        message_size = min(2 * framesize, MOSQUITTO_SIZE_CEILING - HEADER_ALLOWANCE)
        return cls(
            max_queued_messages=int(config["broker.max-queued-messages"]),
            max_inflight_messages=int(config["broker.max-inflight-messages"]),
            message_size_limit=message_size,
            max_packet_size=message_size + HEADER_ALLOWANCE,
        )
