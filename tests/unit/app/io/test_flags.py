import argparse

import pytest
from prometheus_client import CollectorRegistry

from app.io.flags import add_process_flags, process_listeners


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        pytest.param([], ["metrics", "health probe"], id="both"),
        pytest.param(["--metrics-bind-address=0"], ["health probe"], id="no-metrics"),
        pytest.param(["--health-probe-bind-address=0"], ["metrics"], id="no-probes"),
        pytest.param(
            ["--metrics-bind-address=0", "--health-probe-bind-address=0"], [], id="neither"
        ),
    ],
)
def test_a_zero_address_turns_its_listener_off(argv: list[str], names: list[str]) -> None:
    parser = argparse.ArgumentParser()
    add_process_flags(parser)
    args = parser.parse_args(["--metrics-secure=false", *argv])
    listeners = process_listeners(args, registry=CollectorRegistry(), api=None, not_ready=list)
    assert [listener.name for listener in listeners] == names
