"""Fixtures: the cluster the tests run against. BATON_ENDPOINTS names one
when set; otherwise a single member is started for the whole run. Tests
that must break a member or its network start their own (harness.py)."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import baton  # noqa: E402
from harness import Cluster  # noqa: E402


@pytest.fixture(scope="session")
def endpoints() -> Iterator[str]:
    if os.environ.get("BATON_ENDPOINTS"):
        yield os.environ["BATON_ENDPOINTS"]
        return
    c = Cluster(1)
    try:
        yield c.endpoints
    finally:
        c.stop()


@pytest.fixture
def client(endpoints: str) -> Iterator[baton.Client]:
    c = baton.connect(endpoints)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def name() -> str:
    """A lock name of this test's own, so a shared cluster's runs never meet."""
    return f"pytest/{uuid.uuid4().hex}"


@pytest.fixture
def node() -> Iterator[Cluster]:
    """A single member of its own, for a test that breaks or restarts it."""
    c = Cluster(1)
    try:
        yield c
    finally:
        c.stop()
