"""Binary sum trees for proportional prioritized replay: one per agent, every operation batched.

`SumTree(capacity, device, trees=K)` holds K trees as one (K, 2 * leaves) float64 tensor. Updates and
searches walk one level at a time for the whole batch (and all trees), so their cost is O(log capacity)
array ops with no Python loop over the batch. On the CPU the walks run in numpy on the same memory: ~20
levels x 3 ops, each about a microsecond in numpy and several in torch; same float64 arithmetic, same
results. float64, because sums over 1e6 leaves must not drift away from the leaves they are made of.

Indices without a tree axis ((B,) instead of (K, B)) address tree 0: the single-agent form.
"""

from __future__ import annotations

import numpy as np
import torch


class SumTree:
    def __init__(self, capacity: int, device: torch.device | str, trees: int = 1):
        self.leaves = 1 << max(0, (int(capacity) - 1).bit_length())
        self.depth = self.leaves.bit_length() - 1
        self.tree = torch.zeros((trees, 2 * self.leaves), dtype=torch.float64, device=device)
        self._host = self.tree.numpy() if self.tree.device.type == "cpu" else None
        self.use_numpy = self._host is not None  # False: torch ops only (recordable in a CUDA graph)

    @property
    def _np(self) -> np.ndarray | None:
        return self._host if self.use_numpy else None

    @property
    def total(self) -> torch.Tensor:
        """(K,) sums of all leaves: each tree's total priority mass."""
        return self.tree[:, 1]

    def leaf_values(self, idx: torch.Tensor) -> torch.Tensor:
        """idx (B,) of tree 0, or (K, B) -> the leaves' values, same shape."""
        if idx.dim() == 1:
            return self.tree[0, idx + self.leaves]
        return self.tree.gather(1, idx + self.leaves)

    def leaves_of(self, size: int) -> torch.Tensor:
        """(K, size): the first `size` leaves of every tree."""
        return self.tree[:, self.leaves : self.leaves + size]

    def update(self, idx: torch.Tensor, values: torch.Tensor, tree: torch.Tensor | None = None) -> None:
        """Set leaf idx[i] (of tree tree[i]; tree 0 when None) to values[i], flat (N,) tensors, and
        recompute the sums above. Repeated parents just recompute the same sum."""
        if self._np is not None:
            t = self._np if tree is not None else self._np[0]
            pos = idx.numpy() + self.leaves
            rows = (tree.numpy(),) if tree is not None else ()
            t[(*rows, pos)] = values.to(torch.float64).numpy()
            for _ in range(self.depth):
                pos = pos // 2
                t[(*rows, pos)] = t[(*rows, 2 * pos)] + t[(*rows, 2 * pos + 1)]
            return
        tt = self.tree if tree is not None else self.tree[0]
        trows = (tree,) if tree is not None else ()
        tpos = idx + self.leaves
        tt[(*trows, tpos)] = values.to(tt.dtype)
        for _ in range(self.depth):
            tpos = tpos // 2
            tt[(*trows, tpos)] = tt[(*trows, 2 * tpos)] + tt[(*trows, 2 * tpos + 1)]

    def find(self, mass: torch.Tensor) -> torch.Tensor:
        """Leaf index i with prefix_sum(i) <= mass < prefix_sum(i + 1), for each mass: (B,) in tree 0, or
        (K, B) with row k in tree k."""
        single = mass.dim() == 1
        if self._np is not None:
            t = self._np[0] if single else self._np
            m = mass.to(torch.float64).numpy()
            i = np.ones(m.shape, dtype=np.int64)
            for _ in range(self.depth):
                left = t[2 * i] if single else np.take_along_axis(t, 2 * i, axis=1)
                go_right = m >= left
                m = np.where(go_right, m - left, m)
                i = 2 * i + go_right
            return torch.from_numpy(i - self.leaves)
        tt = self.tree[0] if single else self.tree
        idx = torch.ones_like(mass, dtype=torch.long)
        tm = mass.to(tt.dtype)
        for _ in range(self.depth):
            tleft = tt[2 * idx] if single else tt.gather(1, 2 * idx)
            right = tm >= tleft
            tm = torch.where(right, tm - tleft, tm)
            idx = 2 * idx + right.long()
        return idx - self.leaves
