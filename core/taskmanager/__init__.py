"""The TaskManager process: a TaskExecutor endpoint with a slot table."""
