"""The protocol's namespace: every message module's messages are ``p.X``, and the two
accepting answers to a registration share one definition but keep their wire names."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import clusterdeck.core.protocol as protocol
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.rpc import Envelope, decode, encode, message_types

FRAME = 64 * 1024


def test_every_registered_message_type_is_named_in_the_namespace() -> None:
    for module in pkgutil.iter_modules(protocol.__path__):
        importlib.import_module(f"{protocol.__name__}.{module.name}")
    for name, cls in message_types().items():
        if cls.__module__.startswith(protocol.__name__):
            assert getattr(p, name) is cls, name


def test_the_namespace_lists_exactly_what_it_holds() -> None:
    assert sorted(p.__all__) == sorted(n for n in vars(p) if not n.startswith("_")
                                       and n != "annotations")


@pytest.mark.parametrize("answer", [p.AcknowledgeRegistration, p.AlreadyRegistered])
def test_an_accepting_answer_keeps_its_wire_name_and_fields(answer: type) -> None:
    sent = answer("reg-1", "resourcemanager", "token", 2.5, {"spark.executor.cores": "2"})
    data = encode(Envelope("reply", "jm", sent, correlation_id="c1"), FRAME)
    assert f'"type":"{answer.__name__}"' in data.decode()
    received = decode(data, FRAME).message
    assert type(received) is answer
    assert received == sent


def test_a_repeated_registration_is_not_taken_for_a_new_one() -> None:
    again = p.AlreadyRegistered("reg-1", "resourcemanager", "token", 2.5)
    assert isinstance(again, p.RegistrationAccepted)
    assert not isinstance(again, p.AcknowledgeRegistration)
    assert again != p.AcknowledgeRegistration("reg-1", "resourcemanager", "token", 2.5)
