"""Benchmarks run by hand: each module prints a Markdown table (see docs/benchmarks.md).

Every benchmark runs in a throw-away CLUSTERDECK_HOME and stops every process it started,
also when it fails or is interrupted.
"""
