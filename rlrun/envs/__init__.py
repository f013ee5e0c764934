"""Environments: gymnasium vector envs, ALE games, CartPole's numpy vector env, pixels, wrappers."""
