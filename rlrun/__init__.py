"""rlrun: a config-driven experiment runner for deep Q-learning."""

__version__ = "0.1.0"
