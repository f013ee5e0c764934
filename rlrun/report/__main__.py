"""`python -m rlrun.report <sweep dir>` (also the console script `rlrun-report`)."""

from rlrun.report import main

main()
