"""The GUI's controllers: the main window's wiring, commands and reactions, and the flows
that act on the cluster for the user (submission, job commands, inspection, the tray).
Views lay out widgets and show models; controllers connect them to the session and the
bridge. GUI thread only."""
