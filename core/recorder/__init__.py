"""The flight recorder: a cluster's messages and logs in one SQLite file that outlives it."""
