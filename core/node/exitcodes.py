"""Exit codes of every clusterdeck command and process, one table (docs/cli.md)."""

OK = 0
FAILED = 1           # the job failed, or the command could not do its work
USAGE = 2            # bad command line or configuration
CANCELED = 3         # the job was canceled
REJECTED = 4         # the job was refused at submit (broken job file, bad artifact)
UNREACHABLE = 5      # no broker or no JobManager answered
REFUSED = 6          # a TaskManager's registration was refused (wrong cluster, version)
UNHEALTHY = 7        # a TaskManager could not stop a stuck task and exits to be restarted
NO_DISPLAY = 8       # `gui`: no display, or Qt's platform plugin lacks a library
LOCKED = 9           # the cluster already runs: another supervisor or JobManager holds its lock
SPARK_LOST = 10      # a TaskManager's Spark JVM died and Spark could not start again
DISCONNECTED = 11    # the broker connection stayed broken past broker.reconnect-timeout
LEADERSHIP_LOST = 12  # a JobManager lost its leadership (docs/ha.md) and exits to stand by
CLOSED_PIPE = 141    # stdout was closed early (`| head`): quiet, as a shell's SIGPIPE exit
