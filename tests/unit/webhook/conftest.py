from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.webhook.process import Running
from tests.unit.webhook.process import webhook_process as start_webhook


@pytest.fixture
def webhook_process(tmp_path: Path) -> Iterator[Running]:
    with start_webhook(tmp_path) as running:
        yield running
