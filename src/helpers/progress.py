"""Progress display for long training loops (off in notebooks whose output nbval checks)."""

from __future__ import annotations


class Progress:
    """A thin wrapper over ``keras.utils.Progbar`` that does nothing when ``verbose`` is false.

    >>> bar = Progress(total=3, verbose=False)
    >>> for step in range(3):
    ...     bar.update(step + 1, loss=0.5)
    """

    def __init__(self, total: int | None, *, verbose: bool = True, label: str = "step"):
        self.verbose = bool(verbose)
        self._bar = None
        if self.verbose:
            import keras

            self._bar = keras.utils.Progbar(total, unit_name=label)

    def update(self, current: int, **values: float) -> None:
        if self._bar is not None:
            self._bar.update(current, values=[(k, float(v)) for k, v in values.items()])
