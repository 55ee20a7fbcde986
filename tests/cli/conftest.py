"""pytest fixtures of the `pyc` command-line tests (helpers are in clitest.py)."""

import pytest

import pyctest
from clitest import Sessions, unique_name


def pytest_collection_modifyitems(config, items):
    if not pyctest.IS_PYC:
        skip = pytest.mark.skip(reason="the pyc command drives pyc kernels only (PYC_TEST_ARGV is set)")
        for item in items:
            if "/tests/cli/" in str(item.fspath):
                item.add_marker(skip)


@pytest.fixture
def sessions():
    s = Sessions()
    yield s
    s.close()


@pytest.fixture(scope="module")
def shared():
    """One session for a module's tests that only run cells in it."""
    s = Sessions()
    name = s.new(unique_name("shared"))
    yield name
    s.close()
