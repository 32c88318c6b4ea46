"""The errors of the job layer, each carrying the user's traceback as text.

Tracebacks travel as text because they cross the wire (TaskManager -> JobMaster ->
client) and are shown in the GUI's failure view; exception objects never do.
"""

from __future__ import annotations


class JobDefinitionError(ValueError):
    """A pipeline declared in ``build(env)`` cannot run (no sink, a SQL statement over
    several parallel inputs without a key, ...). Raised while the graph is built."""


class JobLoadError(Exception):
    """A job file was refused at submit time (or could not be loaded on a TaskManager).

    ``message`` says what is wrong in one line; ``traceback_text`` is the user's
    traceback (empty when there is none, e.g. a file without ``build``).
    """

    def __init__(self, message: str, traceback_text: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.traceback_text = traceback_text

    def describe(self) -> str:
        """The message and the traceback, as a client prints them."""
        return f"{self.message}\n\n{self.traceback_text}".rstrip() + "\n"


class SubtaskFailed(Exception):
    """A subtask failed: user code raised (in a Spark worker or the script's thread), the
    Spark work failed, or a PySpark script exited with a non-zero status.

    ``traceback_text`` is the user's Python traceback when there is one (extracted from
    Spark's error text for code that ran in a Python worker); ``stdout``/``stderr`` are a
    PySpark script's captured output and ``exit_code`` its exit status.
    """

    def __init__(self, message: str, traceback_text: str = "", *, vertex_id: str = "",
                 subtask_index: int = -1, attempt_id: str = "", stdout: str = "",
                 stderr: str = "", exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.traceback_text = traceback_text
        self.vertex_id = vertex_id
        self.subtask_index = subtask_index
        self.attempt_id = attempt_id
        self.stdout = stdout
        self.stderr = stderr
        self.exit_code = exit_code

    def describe(self) -> str:
        where = f"{self.vertex_id}[{self.subtask_index}] (attempt {self.attempt_id}): " \
            if self.vertex_id else ""
        return f"{where}{self.message}\n\n{self.traceback_text}".rstrip() + "\n"


class SubtaskCancelled(Exception):
    """The subtask's attempt was cancelled (``cancel_subtask``) while it ran."""
