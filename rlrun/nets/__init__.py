"""Q-networks: the network, its heads, and K agents' networks stacked along an agent axis."""
