"""Run at the start of the clock-skewed TaskManager only (``netns.with_clock_offset`` puts
this folder on its ``PYTHONPATH``): its own clock stays off, but what it starts (Spark's
launcher scripts and JVM) does not inherit libfaketime. Preloaded into a JVM, libfaketime
makes it start 3-4 times slower, and in one CI run of the suite Spark's never started."""

import os

os.environ.pop("LD_PRELOAD", None)
