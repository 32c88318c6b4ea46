"""``clusterdeck config show`` with Spark properties: printed with the options, refused
with exit 2 when malformed."""

from __future__ import annotations

import tomllib

from clusterdeck.core.cli.main import main


def test_config_show_prints_spark_properties_from_the_command_line(capsys) -> None:
    status = main(["config", "show", "-D", "spark.executor.memory=2g",
                   "-D", "spark.sql.shuffle.partitions=7"])
    assert status == 0
    shown = tomllib.loads(capsys.readouterr().out)
    assert shown["spark.executor.memory"] == "2g"
    assert shown["spark.sql.shuffle.partitions"] == "7"
    assert shown["spark.master"] == ""


def test_config_show_refuses_a_malformed_spark_key_naming_it(capsys) -> None:
    status = main(["config", "show", "-D", "spark..memory=2g"])
    assert status == 2
    assert "bad Spark property name 'spark..memory'" in capsys.readouterr().err
