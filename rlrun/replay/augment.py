"""Augmentation of sampled batches: `buffer.augment=random_shift` (DrQ, Kostrikov et al. 2020).

Each sampled observation (obs and next_obs, each with its own draw) is padded by `pad` pixels on every side,
repeating its edge pixels (replicate padding, as DrQ pads), and cropped back to its size at a random offset:
a shift of -pad..pad pixels in each direction, the same for all the stacked frames of one observation. It
runs on the batch's device, in the batch's dtype (uint8 frames stay uint8): the crop is a gather of clamped
row and column indices, which is exactly replicate padding followed by a crop.

`buffer.augment_intensity` > 0 then scales each shifted observation by 1 + intensity * clip(N(0, 1), -2, 2),
one draw per observation (Schwarzer et al. 2020's intensity augmentation, which Dopamine's DrQ applies after
the crop with 0.05); the batch's pixels become float32 on the 0-255 scale, which the network divides by 255.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rlrun.replay.base import Batch

AUGMENTATIONS = ("none", "random_shift")


def shift(x: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor) -> torch.Tensor:
    """`x` (N, ..., H, W) with sample n moved by (dy[n], dx[n]) pixels, the vacated border filled with the
    edge pixels: out[n, ..., i, j] = x[n, ..., clamp(i + dy[n]), clamp(j + dx[n])]."""
    n, h, w = x.shape[0], x.shape[-2], x.shape[-1]
    rows = (torch.arange(h, device=x.device) + dy.view(n, 1)).clamp_(0, h - 1)  # (N, H)
    cols = (torch.arange(w, device=x.device) + dx.view(n, 1)).clamp_(0, w - 1)  # (N, W)
    pixels = (rows.unsqueeze(2) * w + cols.unsqueeze(1)).view(n, 1, h * w)  # each output pixel's source, (N, 1, H*W)
    flat = x.reshape(n, -1, h * w)  # the channel axes between the sample and the image as one
    return flat.gather(-1, pixels.expand(flat.shape)).view(x.shape)


class RandomShift:
    """Random shifts of up to `pad` pixels, then (where `intensity` > 0) random intensity scales, drawn from
    `generators` (one per agent: K stacked agents draw from their own streams, as their single runs would).
    `batch_dims`: the leading axes of a sampled batch (1 for one agent's (B, ...) batch, 2 for K agents'
    (K, B, ...))."""

    def __init__(self, pad: int, generators: Sequence[torch.Generator | None], batch_dims: int, intensity: float = 0.0):
        self.pad, self.generators, self.batch_dims = int(pad), list(generators), batch_dims
        self.intensity = float(intensity)

    def _offsets(self, count: int, device: torch.device) -> torch.Tensor:
        """(agents * count,) offsets in -pad..pad, agent by agent."""
        span = 2 * self.pad + 1
        draws = [torch.randint(0, span, (count,), device=device, generator=g) for g in self.generators]
        return torch.cat(draws) - self.pad

    def _scales(self, count: int, device: torch.device) -> torch.Tensor:
        """(agents * count,) factors 1 + intensity * clip(N(0, 1), -2, 2), agent by agent."""
        draws = [torch.randn(count, device=device, generator=g) for g in self.generators]
        return 1.0 + self.intensity * torch.cat(draws).clamp_(-2.0, 2.0)

    def images(self, x: torch.Tensor) -> torch.Tensor:
        """Every sample of `x` (*batch, ..., H, W) shifted by its own random offset (and scaled by its own
        intensity factor)."""
        lead = x.shape[: self.batch_dims]
        flat = x.reshape(-1, *x.shape[self.batch_dims :])
        per_agent = flat.shape[0] // len(self.generators)
        dy, dx = self._offsets(per_agent, x.device), self._offsets(per_agent, x.device)
        flat = shift(flat, dy, dx)
        if self.intensity > 0:
            scales = self._scales(per_agent, x.device)
            flat = flat.float() * scales.view(-1, *(1,) * (flat.dim() - 1))
        return flat.reshape(*lead, *flat.shape[1:])

    def __call__(self, batch: Batch) -> Batch:
        return batch._replace(obs=self.images(batch.obs), next_obs=self.images(batch.next_obs))


def make_augmentation(
    augment: str, pad: int, generators: Sequence[torch.Generator | None], batch_dims: int, intensity: float = 0.0
) -> RandomShift | None:
    """buffer.augment as the callable a buffer applies to its samples (None for `none`)."""
    if augment == "none":
        return None
    if augment == "random_shift":
        return RandomShift(pad, generators, batch_dims, intensity)
    raise ValueError(f"buffer.augment={augment!r}: allowed {', '.join(AUGMENTATIONS)}")
