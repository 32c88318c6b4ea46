"""The PySpark script shim leaves SparkContext constructible once a script has run."""

from __future__ import annotations

from pyspark import SparkContext

from clusterdeck.core.engine import script


def test_a_sparkcontext_can_be_made_again_after_the_shim_is_removed() -> None:
    script._patch()
    script._unpatch()
    # What SparkContext(conf=...) does first; it raised "object.__new__() takes exactly
    # one argument" after the shim deleted its __new__ (a Spark restart then failed).
    context = SparkContext.__new__(SparkContext, master="local[1]", appName="x")
    assert type(context) is SparkContext
