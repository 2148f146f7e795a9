"""Fixtures for the client bridge tests: the fake Gemini endpoint and the anyio backend.

The helpers live in ``client_support.py``; this directory is appended to ``sys.path`` (never
prepended) so its modules never shadow another suite's.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.append(HERE)

from fake_gemini import FakeGemini  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fake_gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake
