"""Free heap pages are handed back after each wave, once its connections have idled out."""

import asyncio

import pytest

from reconciler.memory import malloc_trim, release_after_waves


def test_trims_once_per_settled_wave() -> None:
    async def scenario() -> tuple[list[float], list[int]]:
        waves = asyncio.Queue[None]()
        asked: list[float] = []
        trims: list[int] = []

        async def wave_settled(quiet: float) -> None:
            asked.append(quiet)
            await waves.get()

        task = asyncio.create_task(
            release_after_waves(wave_settled, lambda: trims.append(waves.qsize()), quiet=7.0)
        )
        await asyncio.sleep(0.05)
        assert trims == []  # no wave, no trim
        waves.put_nowait(None)
        waves.put_nowait(None)
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return asked, trims

    asked, trims = asyncio.run(scenario())
    assert trims == [1, 0]
    assert set(asked) == {7.0}


def test_the_c_library_trim_is_found_and_runs() -> None:
    trim = malloc_trim()
    if trim is None:
        pytest.fail("glibc's malloc_trim not found: the image's C library is glibc")
    assert trim() in (0, 1)
