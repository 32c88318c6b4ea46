"""Spark properties in the configuration: any ``spark.*`` key, from the file's tables or
quoted keys and from ``-D``, kept as the string Spark reads, checked, and printed so that
it reads back."""

from __future__ import annotations

import re
import textwrap

import pytest

from clusterdeck.core.config.settings import Config, ConfigError, load, parse_override


def from_file(tmp_path, text: str, **overrides: str) -> Config:
    path = tmp_path / "clusterdeck.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return load(path, overrides)


def test_a_spark_table_in_the_file_becomes_dotted_spark_properties(tmp_path) -> None:
    config = from_file(tmp_path, """
        [spark]
        executor.memory = "2g"
        master = "local[3]"

        [spark.sql]
        shuffle.partitions = 7
        adaptive.enabled = false
        """)
    assert config.spark_properties() == {"spark.executor.memory": "2g",
                                         "spark.sql.adaptive.enabled": "false",
                                         "spark.sql.shuffle.partitions": "7"}
    assert config["spark.master"] == "local[3]"


def test_a_key_that_is_also_the_prefix_of_another_is_written_as_quoted_keys(tmp_path) -> None:
    config = from_file(tmp_path, """
        "spark.speculation" = true
        "spark.speculation.multiplier" = 1.5
        """)
    assert config.spark_properties() == {"spark.speculation": "true",
                                         "spark.speculation.multiplier": "1.5"}


def test_a_command_line_property_is_kept_as_given_and_wins_over_the_file(tmp_path) -> None:
    config = from_file(tmp_path, '"spark.executor.memory" = "1g"\n',
                       **dict([parse_override("spark.executor.memory=4g"),
                               parse_override("spark.driver.extraJavaOptions=-Xss4m -Da=b")]))
    assert config["spark.executor.memory"] == "4g"
    assert config["spark.driver.extraJavaOptions"] == "-Xss4m -Da=b"


@pytest.mark.parametrize(("value", "spark_form"), [
    (True, "true"), (False, "false"), (8, "8"), (0.75, "0.75"), ("512m", "512m"), ("", ""),
])
def test_a_toml_value_becomes_the_string_spark_reads(value, spark_form) -> None:
    assert Config({"spark.some.key": value})["spark.some.key"] == spark_form


@pytest.mark.parametrize("value", [[1, 2], float("inf"), float("nan"), None])
def test_a_value_spark_cannot_read_is_refused_naming_the_key(value) -> None:
    with pytest.raises(ConfigError, match=re.escape("bad value for spark.some.key")):
        Config({"spark.some.key": value})


def test_a_date_in_the_file_is_refused_naming_the_key(tmp_path) -> None:
    expected = re.escape("bad value for spark.some.key: expected a string")
    with pytest.raises(ConfigError, match=expected):
        from_file(tmp_path, '"spark.some.key" = 2024-01-01\n')


@pytest.mark.parametrize("key", ["spark.", "spark..memory", "spark.executor.", "spark.a b",
                                 "spark.a=b", 'spark.a"b', "spark.a\\b", "spark.a\tb"])
def test_a_badly_shaped_spark_key_is_refused_naming_it(key) -> None:
    with pytest.raises(ConfigError, match="bad Spark property name"):
        Config({key: "1"})


@pytest.mark.parametrize("key", ["spark.remote", "spark.api.mode", "spark.submit.deployMode"])
def test_a_key_that_would_take_spark_out_of_the_taskmanager_is_refused(key) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"{key} cannot be set")):
        Config({key: "sc://elsewhere"})


@pytest.mark.parametrize("key", ["sparks.executor.memory", "spark", "executor.memory"])
def test_an_unknown_key_outside_spark_is_still_refused(key) -> None:
    with pytest.raises(ConfigError, match="unknown configuration key"):
        Config({key: "2g"})


def test_our_own_spark_options_are_parsed_as_options_not_passed_through() -> None:
    with pytest.raises(ConfigError, match=re.escape("bad value for spark.start")):
        Config({"spark.start": "soon"})
    config = Config({"spark.master": "local[1]", "spark.start": "lazy"})
    assert config.spark_properties() == {}


def test_spark_properties_count_as_changed_from_the_defaults() -> None:
    config = Config({"spark.executor.memory": "2g", "heartbeat.interval": 1.0})
    assert config.changed() == {"spark.executor.memory": "2g"}


def test_the_printed_configuration_reads_back_with_its_spark_properties(tmp_path) -> None:
    config = Config({"cluster.id": "lab", "spark.sql.shuffle.partitions": 7,
                     "spark.executorEnv.GREETING": 'say "hi"\\\nand\tgo',
                     "spark.app.name": "ünïcode"})
    printed = config.to_toml()
    assert '"spark.sql.shuffle.partitions" = "7"\n' in printed
    assert printed.index('"restart-strategy.exponential-delay.jitter"') < printed.index(
        '"spark.app.name"') < printed.index('"spark.executorEnv.GREETING"')
    (tmp_path / "shown.toml").write_text(printed, encoding="utf-8")
    assert dict(load(tmp_path / "shown.toml")) == dict(config)


def test_overrides_keep_the_spark_properties() -> None:
    config = Config({"spark.executor.memory": "2g"}).with_overrides({"cluster.id": "lab"})
    assert config.spark_properties() == {"spark.executor.memory": "2g"}
