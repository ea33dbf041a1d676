"""The benchmark scripts live in benchmarks/, not in the package: tests import them by name through this
fixture (the folder on sys.path only while importing, as the scripts import their siblings the same way)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def benchmark_module():
    def load(name: str):
        sys.path.insert(0, str(BENCHMARKS))
        try:
            return importlib.import_module(name)
        finally:
            sys.path.remove(str(BENCHMARKS))

    return load
