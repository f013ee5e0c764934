"""The pieces of `python scripts/bench.py`: common (running, timing, reporting), runs (whole training
processes), parts (components timed in this process)."""
