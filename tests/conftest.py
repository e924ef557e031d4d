"""Shared pytest setup for torch_tpu's Python tests: makes the repository importable
and imports torch_tpu once, so every test file sees the ``tpu`` device."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch_tpu  # noqa: E402,F401
