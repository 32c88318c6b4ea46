"""A look inside a running process: thread dumps and flame graphs (py-spy)."""
