"""The widgets: the main window and each view; a view takes a model or the bridge's signals
and never talks to the cluster itself."""
