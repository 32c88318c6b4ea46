"""The arguments of ``env.mqtt_source`` and ``stream.write_mqtt``, checked when the job is
built (on the submitter's machine), so a typo fails there and not on a TaskManager.
What they mean: docs/streaming.md, "The MQTT source and sink"."""

from __future__ import annotations

from typing import Any

from clusterdeck.broker.address import BrokerAddress

FORMATS = ("text", "json")  # as core/streaming/mqttsource.py reads them
MAX_BUFFERED = 10_000
MAX_PAYLOAD = 1 << 20
MAX_INFLIGHT = 1000


def _topic(op_name: str, topic: Any, wildcards: bool) -> str:
    if not isinstance(topic, str) or not topic or "\0" in topic:
        raise ValueError(f"{op_name}(): topic is a non-empty string, got {topic!r}")
    if topic.startswith("$"):
        raise ValueError(f"{op_name}(): topics starting with '$' are the broker's "
                         f"({topic!r}); shared subscriptions are made for you")
    levels = topic.split("/")
    if not wildcards and ("+" in topic or "#" in topic):
        raise ValueError(f"{op_name}(): a message goes to one topic, without + or #; "
                         f"got {topic!r}")
    if any(("+" in level and level != "+") or ("#" in level and level != "#")
           for level in levels) or "#" in levels[:-1]:
        raise ValueError(f"{op_name}(): {topic!r} is no valid topic filter (+ stands for "
                         f"a whole level, # for the last one)")
    return topic


def _url(op_name: str, url: Any) -> str | None:
    if url is None:
        return None
    try:
        return BrokerAddress.parse(url).url(with_password=True)
    except ValueError as error:
        raise ValueError(f"{op_name}(): {error}") from None


def _qos(op_name: str, qos: Any) -> int:
    if qos not in (0, 1) or isinstance(qos, bool):
        raise ValueError(f"{op_name}(): qos is 1 (at least once) or 0 (at most once), "
                         f"got {qos!r}")
    return int(qos)


def _count(op_name: str, what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{op_name}(): {what} is a whole number >= 1, got {value!r}")
    return value


def source_params(topic: Any, url: Any, qos: Any, record_format: Any, max_buffered: Any,
                  max_payload: Any) -> dict[str, Any]:
    if record_format not in FORMATS:
        raise ValueError(f"mqtt_source(): format is one of {', '.join(FORMATS)}, got "
                         f"{record_format!r}")
    return {"topic": _topic("mqtt_source", topic, wildcards=True),
            "url": _url("mqtt_source", url), "qos": _qos("mqtt_source", qos),
            "format": record_format,
            "max_buffered": _count("mqtt_source", "max_buffered", max_buffered),
            "max_payload": _count("mqtt_source", "max_payload", max_payload)}


def sink_params(topic: Any, url: Any, qos: Any, retain: Any, max_inflight: Any
                ) -> dict[str, Any]:
    return {"topic": _topic("write_mqtt", topic, wildcards=False),
            "url": _url("write_mqtt", url), "qos": _qos("write_mqtt", qos),
            "retain": bool(retain),
            "max_inflight": _count("write_mqtt", "max_inflight", max_inflight)}
