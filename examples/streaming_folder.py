"""A streaming job watching a folder (docs/streaming.md): the lines of the ``*.txt`` files
that appear in IN, comments and blank lines dropped, upper-cased, into text files that
become visible with each completed checkpoint, exactly once; or printed, at least once.

    clusterdeck submit examples/streaming_folder.py -- IN OUT [IDLE]

IN: the folder to watch. A file is read once it stayed the same for a monitor interval
(0.2 s here); names starting with ``.`` or ``_`` are never read, so a writer can write
``.name.txt`` and rename it to ``name.txt`` when done. OUT: the output folder, or ``-`` to
print the lines instead (``clusterdeck submit`` shows them as they come). IDLE: seconds
with nothing new in IN after which the job ends (default 0: it runs until cancelled).
Try it with a second terminal:

    mkdir -p /tmp/in && clusterdeck submit examples/streaming_folder.py -- /tmp/in - 30
    printf 'hello\\n# not this\\nworld\\n' > /tmp/in/.a.txt && mv /tmp/in/.a.txt /tmp/in/a.txt
"""


def build(env):
    folder = env.args[0] if env.args else "streaming-in"
    out = env.args[1] if len(env.args) > 1 else "streaming-out"
    idle = float(env.args[2]) if len(env.args) > 2 else 0.0
    env.set_job_name("folder to files").set_parallelism(2)
    env.enable_checkpointing(0.5)
    lines = (env.folder_source(folder, "*.txt", monitor_interval=0.2,
                               stop_when_idle=idle or None)
             .filter(lambda line: line.strip() and not line.startswith("#"))
             .map(lambda line: line.strip().upper()))
    if out == "-":
        lines.print()
    else:
        lines.write_text(out)
