"""train tests start from a known random state."""

import pytest

import ggrad


@pytest.fixture(autouse=True)
def _seed():
    ggrad.manual_seed(0)
