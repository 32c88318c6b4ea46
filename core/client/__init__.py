"""The client side of a cluster: find its leader, submit and follow jobs, start a local cluster.

Used by the command line and, through the bridge, by the desktop app.
"""
