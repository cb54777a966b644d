"""Writes SIZE_MB MiB of compressible but not trivial text to PATH: lines of
words (from /usr/share/dict/words, else w0..w4999) with numbers, seeded, so
every run of a benchmark compresses the same input.

Usage: python3 bench/text_input.py PATH SIZE_MB
"""
import os
import random
import sys

random.seed(7)
dictionary = '/usr/share/dict/words'
words = [w.strip() for w in open(dictionary)] if os.path.exists(dictionary) else [f"w{i}" for i in range(5000)]
target = int(sys.argv[2]) << 20
with open(sys.argv[1], 'w') as f:
    n = 0
    while n < target:
        line = ' '.join(random.choice(words) + str(random.randrange(1000)) for _ in range(12)) + '\n'
        f.write(line)
        n += len(line)
