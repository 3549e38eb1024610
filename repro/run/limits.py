"""The process's open-file limit, sized to the connections a run will hold open.

Offline issues every sample at once; the HTTP client keeps up to `concurrency` connections per endpoint,
so 4 endpoints x 2048 sockets exceed the usual soft limit of 1024 and the run would die with EMFILE.
"""

from __future__ import annotations

from repro.core.errors import InputError

HEADROOM = 512


def open_files_needed(endpoints: int, concurrency: int) -> int:
    """Sockets for every in-flight request, plus LoadGen's logs, the dataset, the tokenizer and Python itself."""
    return endpoints * concurrency + HEADROOM


def ensure_open_files(needed: int, *, command: str = "repro run offline") -> dict[str, int]:
    """Raise the soft RLIMIT_NOFILE to `needed` if the hard limit allows; else one clear error naming `ulimit -n`."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    unlimited = hard == resource.RLIM_INFINITY
    if soft != resource.RLIM_INFINITY and soft < needed:
        if not unlimited and hard < needed:
            raise InputError(
                f"This run keeps up to {needed} connections and files open, but the open-file limit is "
                f"{soft} (hard limit {hard}), so it would fail with 'Too many open files'.",
                f"`ulimit -n {needed}` (as root, or raise nofile in /etc/security/limits.conf), then `{command}`",
            )
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        return {"before": soft, "now": needed, "hard": -1 if unlimited else hard}
    return {"before": soft, "now": soft, "hard": -1 if unlimited else hard}
