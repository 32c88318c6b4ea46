"""clusterdeck's desktop app (PySide6).

``core`` knows nothing of Qt; this package knows nothing of MQTT. Everything that happens
in the cluster reaches the widgets through one object, ``bridge.ClusterBridge``, which turns
events from paho's network thread, the supervisor's thread and the sampler's thread
into Qt signals on the GUI thread, coalesced to a steady redraw rate. Views take the
bridge's signals (or a model fed by them) and never talk to the cluster themselves.

The floors, enforced by an import contract: the launcher and the app start the window;
``controllers`` wire views to the session, the bridge and the job commands; ``views`` lay
out widgets and show ``models``, which know no view.
"""
