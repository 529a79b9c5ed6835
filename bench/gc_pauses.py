"""The garbage collector's pauses in this process, by generation, for a bench to print beside its times: a full
(generation 2) collection walks every object the process has not frozen (core.warmup.heap_freeze), and the
request or task it falls in waits for it."""

from __future__ import annotations

import gc
import time


class GcPauses:
    """Counts from its creation until stop()."""

    def __init__(self) -> None:
        self._started = 0.0
        self.pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        gc.callbacks.append(self._seen)

    def _seen(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses[info["generation"]].append(time.perf_counter() - self._started)

    def stop(self) -> None:
        if self._seen in gc.callbacks:
            gc.callbacks.remove(self._seen)

    def summary(self, during: str) -> str:
        parts = [f"generation {generation}: {len(pauses)}, {sum(pauses) * 1000:.1f} ms in all, longest "
                 f"{max(pauses, default=0.0) * 1000:.1f} ms" for generation, pauses in self.pauses.items()]
        return f"garbage collections during {during}: " + "; ".join(parts)
