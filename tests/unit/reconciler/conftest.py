from collections.abc import Iterator

import pytest

from tests.unit.reconciler.world import World


@pytest.fixture(autouse=True)
def _close_worlds() -> Iterator[None]:
    yield
    while World.open_worlds:
        World.open_worlds.pop().close()
