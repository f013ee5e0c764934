"""rlrun's version (`rlrun.__version__`, `python -m rlrun.train --version`), in a module of its own so that the
command line reads it without importing the package's lazy names."""

__version__ = "0.1.0"
