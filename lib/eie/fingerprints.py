"""A short hash of named tensors: what keys a stored evaluation piece and the heuristics' in-process memo."""

from __future__ import annotations

import hashlib

import torch


def tensors_fingerprint(tensors: dict) -> str:
    """A hash of named tensors (names, shapes, dtypes and values): a model's `state_dict()`, a test set."""
    digest = hashlib.sha256()
    for name, tensor in tensors.items():
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]
