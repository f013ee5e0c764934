"""`python -m rlrun.compare`: is B better than A? Two settings trained on the same seeds in batched rounds
until the evidence decides (or two folders of finished runs paired by seed), with paired statistics whose
error rate holds however many looks are taken. docs/compare.md is the user's page.

The modules: `stats` (paired tests and intervals), `sequential` (the rules for deciding at several looks),
`arms` (per-seed scores read from run directories), `rounds` (each round's batched run: trained, resumed
or reused), `decide` (a look and the verdict line), `output` (compare.md, compare.csv, curves.png), `run`
(the whole comparison) and `cli` (the command line).
"""
