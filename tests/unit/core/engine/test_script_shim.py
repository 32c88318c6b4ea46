"""The PySpark script shim leaves SparkContext constructible once a script has run; a
script's exit status is the one Python would exit with."""

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


def test_exit_status_is_what_python_script_py_would_exit_with() -> None:
    assert script.exit_status(None) == 0
    assert script.exit_status(0) == 0
    assert script.exit_status(3) == 3
    assert script.exit_status(True) == 1
    assert script.exit_status(256) == 0   # the operating system keeps the low byte
    assert script.exit_status(-1) == 255
    assert script.exit_status("giving up") == 1
