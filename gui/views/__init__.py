"""The widgets: the main window's layout and each view. A view lays out widgets and shows
a model or the bridge's signals; it never talks to the cluster itself (the controllers in
gui/controllers connect it)."""
