"""A script's --conf settings on its session: runtime ones set, fixed ones warned about."""

from __future__ import annotations

from typing import Any

import pytest

from clusterdeck.core.engine.scriptconf import SparkConfError, apply_settings

RUNTIME = {"spark.sql.shuffle.partitions"}
STATIC = {"spark.sql.warehouse.dir"}  # Spark refuses to set it on a session


class FakeConf:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def isModifiable(self, key: str) -> bool:
        return key in RUNTIME

    def set(self, key: str, value: str) -> None:
        if key in STATIC:
            raise RuntimeError(f"Cannot modify the value of the static Spark config: {key}")
        if key in RUNTIME and not value.isdigit():
            raise RuntimeError(f"The value '{value}' in the config \"{key}\" is invalid.\n"
                               "It should be an int")
        self.values[key] = value


class FakeSession:
    """What apply_settings uses of a SparkSession: its conf and its context's SparkConf."""

    def __init__(self, started_with: dict[str, str]) -> None:
        self.conf = FakeConf()
        spark_conf = type("SparkConf", (), {
            "contains": lambda _self, key: key in started_with,
            "get": lambda _self, key, default=None: started_with.get(key, default)})()
        self.sparkContext: Any = type("Context", (), {"getConf": lambda _self: spark_conf})()


def test_runtime_and_unknown_settings_are_set_on_the_session_without_warnings():
    session = FakeSession({"spark.master": "local[2]"})
    warnings = apply_settings(session, {"spark.sql.shuffle.partitions": "3",
                                        "spark.myapp.mode": "fast"})
    assert warnings == []
    assert session.conf.values == {"spark.sql.shuffle.partitions": "3",
                                   "spark.myapp.mode": "fast"}


def test_settings_fixed_when_spark_started_are_not_set_and_each_gets_a_warning():
    session = FakeSession({"spark.executor.memory": "1g"})
    warnings = apply_settings(session, {"spark.executor.memory": "4g",
                                        "spark.sql.warehouse.dir": "/tmp/w"})
    assert session.conf.values == {}
    assert len(warnings) == 2
    assert warnings[0].startswith("--conf spark.executor.memory=4g is not applied")
    assert "value there: 1g" in warnings[0]
    assert warnings[1].startswith("--conf spark.sql.warehouse.dir=/tmp/w is not applied")


def test_a_runtime_setting_with_a_bad_value_is_an_error_naming_it():
    with pytest.raises(SparkConfError) as refused:
        apply_settings(FakeSession({}), {"spark.sql.shuffle.partitions": "many"})
    assert str(refused.value) == ("--conf spark.sql.shuffle.partitions=many: The value "
                                  "'many' in the config \"spark.sql.shuffle.partitions\" "
                                  "is invalid.")
