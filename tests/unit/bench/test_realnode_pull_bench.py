import pytest

from bench.realnode_pull_bench import Pull, go_duration, pulled


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2.5s", 2.5),
        ("845ms", 0.845),
        ("1m2.25s", 62.25),
        ("1h0m3s", 3603.0),
        ("120µs", 0.00012),
        ("0s", 0.0),
    ],
)
def test_go_durations_as_the_kubelet_prints_them(text: str, seconds: float) -> None:
    assert go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "2.5", "s", "2.5sx", "1m 2s", "-1s"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a Go duration"):
        go_duration(text)


def test_a_pulled_event_gives_the_pull_time_and_the_image_size() -> None:
    message = (
        'Successfully pulled image "ghcr.io/karlkfi/kube-headroom:0.1.0" in 1m31.52s '
        "(1m31.52s including waiting). Image size: 112834567 bytes."
    )
    assert pulled(message) == Pull(seconds=91.52, size_bytes=112834567)


def test_an_image_already_present_is_no_pull() -> None:
    message = 'Container image "ghcr.io/karlkfi/kube-headroom:0.1.0" already present on machine'
    assert pulled(message) is None
