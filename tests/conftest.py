import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))

TRACES = Path(__file__).parent.parent / "src" / "residentkv" / "data" / "traces"


@pytest.fixture
def traces_dir() -> Path:
    return TRACES
