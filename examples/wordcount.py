"""Word count over text files: the classic dataflow job.

    clusterdeck submit examples/wordcount.py [INPUT] [PARALLELISM]

INPUT is a file, a folder or a glob (default: $WORDCOUNT_INPUT, else the bundled
examples/data/words/). Each line is split into words, each word becomes (word, 1), the
pairs are hashed by word and summed. The (word, count) pairs come back to the client;
with $WORDCOUNT_OUTPUT set they are also written there as CSV.
"""

import os
import re
from pathlib import Path

DEFAULT_INPUT = Path(__file__).parent / "data" / "words"
WORD = re.compile(r"[a-z']+")


def build(env):
    source = env.args[0] if env.args else os.environ.get("WORDCOUNT_INPUT", str(DEFAULT_INPUT))
    if len(env.args) > 1:
        env.set_parallelism(int(env.args[1]))
    env.set_job_name("wordcount")
    lines = env.counter("lines")

    def tokenize(line):
        lines.add(1)
        return WORD.findall(line.lower())

    counts = (env.read_text(source, name="read lines")
              .flat_map(tokenize, name="tokenize")
              .map(lambda word: (word, 1), name="pair")
              .key_by(0)
              .sum(1, name="count"))
    counts.collect(name="counts")
    output = os.environ.get("WORDCOUNT_OUTPUT")
    if output:
        counts.write_csv(output, name="write counts")
