"""Relative paths a script hands to Spark, made absolute against the submitter's folder."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from clusterdeck.core.engine import sparkpaths
from clusterdeck.core.engine.sparkpaths import absolute, resolving_against


class FakeReader:
    """Stands in for a PySpark reader: records what would reach the JVM."""

    calls: list[tuple[str, Any]] = []

    def text(self, paths: Any, wholetext: bool = False) -> None:
        FakeReader.calls.append(("text", paths))

    def parquet(self, *paths: str, **options: Any) -> None:
        FakeReader.calls.append(("parquet", (paths, options)))

    def load(self, path: str | None = None, format: str | None = None, **options: Any) -> None:
        FakeReader.calls.append(("load", (path, options)))

    def option(self, key: str, value: Any) -> FakeReader:
        FakeReader.calls.append(("option", (key, value)))
        return self


@pytest.fixture
def patched(monkeypatch):
    FakeReader.calls = []
    monkeypatch.setattr(sparkpaths, "_TAKE_PATHS", ((FakeReader, ("text", "parquet", "load")),))
    monkeypatch.setattr(sparkpaths, "_TAKE_OPTIONS", ((FakeReader, ("option",)),))
    sparkpaths.patch()
    yield FakeReader
    sparkpaths.unpatch()


def test_a_relative_local_path_is_joined_to_the_base_and_others_are_left_alone():
    assert absolute("data/x.txt", "/home/me") == "/home/me/data/x.txt"
    assert absolute("../x.txt", "/home/me") == "/home/me/../x.txt"
    assert absolute("data/*.csv", "/home/me") == "/home/me/data/*.csv"
    for kept in ("/abs/x.txt", "hdfs://nn:8020/x", "file:/tmp/x", "s3a://bucket/x", ""):
        assert absolute(kept, "/home/me") == kept


def test_paths_options_and_lists_are_resolved_on_the_scripts_thread(patched):
    reader = patched()
    with resolving_against("/home/me"):
        reader.text("data/x.txt")
        reader.text(["a.txt", "/abs/b.txt"])
        reader.parquet("p1", "hdfs://nn/p2", mergeSchema=True)
        reader.load(format="csv", path="in.csv")
        reader.option("PATH", "opt.csv").option("header", "true")
        reader.text(paths="kw.txt", wholetext=True)
    assert patched.calls == [
        ("text", "/home/me/data/x.txt"),
        ("text", ["/home/me/a.txt", "/abs/b.txt"]),
        ("parquet", (("/home/me/p1", "hdfs://nn/p2"), {"mergeSchema": True})),
        ("load", ("/home/me/in.csv", {})),
        ("option", ("PATH", "/home/me/opt.csv")),
        ("option", ("header", "true")),
        ("text", "/home/me/kw.txt"),
    ]


def test_other_threads_and_a_script_without_a_base_pass_paths_as_given(patched):
    reader = patched()
    with resolving_against("/home/me"):
        other = threading.Thread(target=lambda: reader.text("data/x.txt"))
        other.start()
        other.join(timeout=10)
    with resolving_against(None):
        reader.text("data/y.txt")
    reader.text("data/z.txt")
    assert patched.calls == [("text", "data/x.txt"), ("text", "data/y.txt"),
                             ("text", "data/z.txt")]


def test_a_wrong_call_gets_the_methods_own_error(patched):
    with resolving_against("/home/me"), pytest.raises(TypeError):
        patched().text()


def test_unpatch_puts_the_methods_back(patched):
    wrapped = FakeReader.__dict__["text"]
    sparkpaths.unpatch()
    assert FakeReader.__dict__["text"] is not wrapped
    assert FakeReader.__dict__["text"].__name__ == "text"
    with resolving_against("/home/me"):
        FakeReader().text("data/x.txt")
    assert FakeReader.calls == [("text", "data/x.txt")]


def test_every_pyspark_method_listed_exists_with_a_path_argument():
    """The table follows the installed PySpark: a renamed argument fails here, not in a job."""
    listed = 0
    for cls, names in sparkpaths._TAKE_PATHS:
        for name in names:
            method = cls.__dict__.get(name)
            if method is None:
                assert name == "xml", f"{cls.__name__}.{name} is gone"
                continue
            sparkpaths._path_taking(method)  # finds its path argument or raises
            listed += 1
    assert listed >= 30
