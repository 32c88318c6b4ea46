"""The command line: argument parsing, the job commands and how they print, exit codes.

The top of the runtime: it may import every room of ``core`` and ``broker``, never ``gui``.
"""
