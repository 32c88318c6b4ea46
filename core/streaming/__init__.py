"""The parts of a streaming task that hold a position or commit output (docs/streaming.md):
replayable sources, whose position a checkpoint keeps, and the file sink that commits its
output per completed checkpoint. Plain Python and files; no Spark, no broker."""
