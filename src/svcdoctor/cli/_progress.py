"""Progress on a terminal for a command that reads a cluster and may watch it: the steps as
dim lines under a spinner, and during the watch window a bar of its elapsed time and the
count of the events seen. Nothing at all when stderr is not a terminal (pipes, CI logs)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from rich.console import Console
from rich.progress import Progress, ProgressColumn, SpinnerColumn, Task, TextColumn
from rich.progress_bar import ProgressBar
from rich.table import Column
from rich.text import Text

if TYPE_CHECKING:
    from svcdoctor.cluster.reader import ClusterReader, WatchEvent


class _WindowBar(ProgressColumn):
    """The share of the watch window gone (empty before the watch starts)."""

    def render(self, task: Task) -> ProgressBar | Text:
        since, window = task.fields.get("since"), task.fields.get("window")
        if since is None or not window:
            return Text("")
        done = min(time.monotonic() - since, window)
        return ProgressBar(total=window, completed=done, width=24)


class _WindowText(ProgressColumn):
    """``12 s of 60 s, 34 events`` during the watch."""

    def render(self, task: Task) -> Text:
        since, window = task.fields.get("since"), task.fields.get("window")
        if since is None or not window:
            return Text("")
        done = min(time.monotonic() - since, window)
        events = task.fields.get("events", 0)
        return Text(f"{done:.0f} s of {window:g} s, {events} event{'s' * (events != 1)}")


class Display:
    """What a command reports its steps and watch to; silent without a console."""

    def __init__(self, progress: Progress | None, window: float | None) -> None:
        self._progress = progress
        self._task = (
            progress.add_task("collecting…", window=window, since=None) if progress else None
        )
        self._events = 0
        self._watch_started = False
        self._lock = threading.Lock()

    def step(self, message: str) -> None:
        """One step: a dim line above the spinner, and the spinner's text."""
        if self._progress is None or self._task is None:
            return
        self._progress.console.print(f"[dim]{message}[/dim]", highlight=False)
        self._progress.update(self._task, description=message)

    def _watching(self) -> None:
        if self._progress is not None and self._task is not None:
            with self._lock:
                if not self._watch_started:  # the first of the watches (and resumptions)
                    self._watch_started = True
                    self._progress.update(self._task, since=time.monotonic())

    def _seen(self) -> None:
        if self._progress is not None and self._task is not None:
            with self._lock:
                self._events += 1
                self._progress.update(self._task, events=self._events)

    def wrap(self, reader: ClusterReader) -> ClusterReader:
        """``reader``, its watches counted (itself when nothing is shown)."""
        return reader if self._progress is None else cast("ClusterReader", _Counted(reader, self))


class _Counted:
    """A reader whose watches tell the display when they start and each event they yield;
    every other attribute is the reader's."""

    def __init__(self, reader: ClusterReader, display: Display) -> None:
        self._reader, self._display = reader, display

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)

    def watch(self, *args: Any, **kwargs: Any) -> Iterator[WatchEvent]:
        self._display._watching()
        events = self._reader.watch(*args, **kwargs)
        try:
            for event in events:
                self._display._seen()
                yield event
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()


@contextmanager
def terminal_progress(
    show: bool, window: float | None = None, console: Console | None = None
) -> Iterator[Display]:
    """A :class:`Display` on stderr (``console``: another) when ``show``, else a silent one;
    ``window``: the watch's length in seconds, if it watches."""
    if not show:
        yield Display(None, None)
        return
    text = Column(no_wrap=True, overflow="ellipsis", max_width=60)  # the bar stays on screen
    columns = (SpinnerColumn(), TextColumn("{task.description}", table_column=text),
               _WindowBar(), _WindowText())  # fmt: skip
    console = console or Console(stderr=True, highlight=False)
    with Progress(*columns, console=console, transient=True, refresh_per_second=4) as progress:
        yield Display(progress, window)
