"""The data service: how bulk data moves between TaskManagers that share no folder.

Flink's TaskManagers serve their result partitions to consumers on other TaskManagers
over a data plane of their own, beside the RPC control plane (seeds 002, 004). Ours is
HTTP with range requests (chosen by measurement, docs/benchmarks.md): every TaskManager
runs a small file server over the files of its attempts (result partitions, collected
rows, printed output), and a consumer, or the JobManager, that cannot see a file on its
own disk fetches it from the TaskManager that wrote it into the same path locally.

- ``capability``: who may read what. A TaskManager's random data key travels once, in
  its registration; the JobMaster turns it into a capability for one job's folder and
  hands that to the consumers it deploys. A capability is an HMAC, so it can be checked
  without state and cannot be stretched to another folder.
- ``server``: the file server (TLS with a self-signed, pinned certificate beyond loopback).
- ``client``: fetching one file, resumed with a range request when a transfer breaks.
"""
