"""Progress of the long steps of a backup or a restore: bars on a terminal, nothing when
the output goes to a file, a pipe or a journal (cron and systemd read every byte)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Never

from tqdm import tqdm


class Progress:
    def __init__(self, *, shown: bool, stream: IO[str] | None = None) -> None:
        self.shown = shown
        self.stream = stream or sys.stderr

    @classmethod
    def on_terminal(cls) -> Progress:
        """Bars when standard error is a terminal, as reindex_taproot shows them."""
        return cls(shown=sys.stderr.isatty())

    @classmethod
    def quiet(cls) -> Progress:
        return cls(shown=False)

    def bar(self, description: str, *, total: float | None = None, unit: str = "it") -> tqdm[Never]:
        """A bar for one step; `unit="B"` counts bytes in KB, MB, GB."""
        return tqdm(
            desc=description,
            total=total,
            unit=unit,
            unit_scale=unit == "B",
            unit_divisor=1024 if unit == "B" else 1000,
            disable=not self.shown,
            file=self.stream,
            leave=True,
        )

    @contextmanager
    def step(self, description: str) -> Iterator[None]:
        """A step that cannot tell how far it has got: its name and the time it takes."""
        with tqdm(
            desc=description,
            bar_format="{desc}: {elapsed}",
            disable=not self.shown,
            file=self.stream,
            leave=True,
        ):
            yield
