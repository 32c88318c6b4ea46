"""clusterdeck's runtime: a Flink-style control plane over MQTT whose tasks run on PySpark.

Nothing in this package imports Qt; the desktop app in ``gui`` builds on it.
"""

__version__ = "0.1.0"
