"""`python -m rlrun.compare` (also the console script `rlrun-compare`)."""

from rlrun.compare.cli import main

main()
