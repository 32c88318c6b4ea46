"""A PySpark script's own Spark settings (``submit --conf``, builder options) on its session.

``spark-submit --conf key=value`` sets a key before Spark starts. A script here gets a
session of the TaskManager's running Spark (``newSession()``), so only what a session
can change at runtime can be had per job: Spark's runtime SQL settings, and keys Spark
does not know (an application's own, read back with ``spark.conf.get``). A session's
settings are its own, so none of them reaches the next job on the TaskManager.

The rest — Spark's static SQL settings and its core ones (``spark.executor.memory``,
``spark.master``, ``spark.app.name``) — were fixed when the TaskManager started its
Spark. Setting one on a session is refused by Spark, or, for a few, accepted and
ignored; either way it cannot take effect, and each comes back as a warning.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession


class SparkConfError(ValueError):
    """A runtime setting given a value Spark refuses (a typo the job would not survive)."""


def apply_settings(session: SparkSession, settings: Mapping[str, str],
                   source: str = "--conf") -> list[str]:
    """Set ``settings`` on ``session``; returns a warning for each one that cannot take
    effect on a running Spark. Raises SparkConfError for a runtime setting's bad value.
    ``source`` names where the settings came from, in messages."""
    warnings = []
    fixed = session.sparkContext.getConf()
    for key, value in settings.items():
        if session.conf.isModifiable(key):
            try:
                session.conf.set(key, value)
            except Exception as error:
                raise SparkConfError(f"{source} {key}={value}: {_first_line(error)}") from None
        elif fixed.contains(key) or not _settable(session, key, value):
            warnings.append(f"{source} {key}={value} is not applied: it is a Spark setting "
                            "fixed when the TaskManager started its Spark (value there: "
                            f"{fixed.get(key, 'its default')}); only runtime SQL settings "
                            "can be set per job")
    return warnings


def _settable(session: SparkSession, key: str, value: str) -> bool:
    """Sets a key Spark does not know of; False for one it refuses (a static setting)."""
    try:
        session.conf.set(key, value)
    except Exception:
        return False
    return True


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
