"""Free heap pages are handed back after each wave, once its connections have idled out."""

import asyncio

import pytest

from reconciler.memory import malloc_trim, release_after_waves


def test_trims_once_per_settled_wave_after_the_delay() -> None:
    trims: list[float] = []

    async def scenario() -> list[float]:
        loop = asyncio.get_running_loop()
        waves = asyncio.Queue[None]()

        async def wave_settled() -> None:
            await waves.get()

        task = asyncio.create_task(
            release_after_waves(wave_settled, lambda: trims.append(loop.time()), delay=0.05)
        )
        started = loop.time()
        await asyncio.sleep(0.1)
        assert trims == []  # no wave, no trim
        waves.put_nowait(None)
        waves.put_nowait(None)
        await asyncio.sleep(0.3)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return [t - started for t in trims]

    after = asyncio.run(scenario())
    assert len(after) == 2
    assert after[0] >= 0.1 + 0.05
    assert after[1] - after[0] >= 0.05


def test_the_c_library_trim_is_found_and_runs() -> None:
    trim = malloc_trim()
    if trim is None:
        pytest.fail("glibc's malloc_trim not found: the image's C library is glibc")
    assert trim() in (0, 1)
