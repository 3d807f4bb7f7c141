"""optim tests: a known random state, and one GGML thread (tiny graphs; see tests/conftest.py)."""

import pytest

import ggrad


@pytest.fixture(autouse=True)
def _seed_and_one_thread(one_thread):
    ggrad.manual_seed(0)
