"""The one place the trainable retrievers import torch from.

OpenMP threads that spin while they wait make small CPU batches many times slower when another
process competes for the cores (see :mod:`simgrag.embed.sentence_transformers`); the wait policy has
to be set before torch is first imported, so it is set here, unless the environment says otherwise.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch
from torch import nn

__all__ = ["nn", "torch"]
