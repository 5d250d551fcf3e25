"""Ctrl-C and SIGTERM at any moment of a command: one line and exit code 130.

Two regimes. While a run is between its compiled chunks (`deferred()`), an interrupt becomes a
KeyboardInterrupt at the next Python instruction, so the chunked driver saves a checkpoint of
the last finished chunk and the command says how to resume. Anywhere else (importing,
building, compiling, which can take many seconds inside XLA) the process leaves at once:
a watcher thread reads the signal from a wakeup pipe even while the main thread is inside
the compiler, writes the one-line message, and exits without tearing the interpreter down
(a KeyboardInterrupt raised inside imports or tracing is swallowed or half-handled by
libraries, and tearing down while compiler threads run crashes). Every file coocflow writes
is written to a temporary name and renamed, so leaving at any moment leaves no half-written file.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

_state: dict = {"deferred": 0, "pending": False, "message": None, "shielded": 0, "held": False}
_exit_lock = threading.Lock()
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def set_message(message: Callable[[], str] | None) -> None:
    """What to say when the process leaves on an interrupt (e.g. how to resume the run). It may
    run on the watcher thread while the main thread imports, so it must import nothing new."""
    _state["message"] = message


@contextmanager
def deferred() -> Iterator[None]:
    """Inside: an interrupt is a KeyboardInterrupt at the next Python instruction (a second one
    while the first waits for a long compiled chunk leaves at once)."""
    _state["deferred"] += 1
    try:
        yield
    finally:
        _state["deferred"] -= 1


@contextmanager
def shielded() -> Iterator[None]:
    """Inside: an interrupt waits until the block is done (writing a finished run's folder, a few
    seconds), then acts as it would have: a KeyboardInterrupt where interrupts are `deferred`, else
    the one-line exit. So an interrupt never leaves a finished run half-written or its staging
    folder behind."""
    _state["shielded"] += 1
    try:
        yield
    finally:
        _state["shielded"] -= 1
    if not _state["shielded"] and _state["held"]:
        _state["held"] = False
        if _state["deferred"]:
            raise KeyboardInterrupt
        exit_interrupted()


@contextmanager
def exposed() -> Iterator[None]:
    """Inside a `shielded` block, a part that interrupts reach as usual (training, whose chunks
    checkpoint), so the shield covers exactly what comes after it."""
    saved, _state["shielded"] = _state["shielded"], 0
    try:
        yield
    finally:
        _state["shielded"] = saved


CHILD_GRACE_S = 5.0
"""How long the worker processes of an interrupted command (a sweep's) get to stop after SIGTERM
before they are killed: the whole command leaves within about twice this."""
RAY_GRACE_S = 1.0
"""How long a local Ray instance's own processes get: its raylet, GCS and agents outlive SIGTERM
while this process is still their driver, so they used the whole `CHILD_GRACE_S` (an interrupted
Ray sweep left after 5.5 s; its results are on disk, nothing of Ray's needs saving)."""


def stop_children(grace: float = CHILD_GRACE_S) -> None:
    """Terminate every process this one started, and theirs (a sweep's multiprocessing workers, a
    local Ray instance's raylet, GCS and workers): SIGTERM, up to `grace` seconds to stop, then SIGKILL.
    An interrupted command leaves no process behind. Imports nothing."""
    mp = sys.modules.get("multiprocessing")
    try:
        children = mp.active_children() if mp is not None else []
        for child in children:
            child.terminate()
        helpers = _multiprocessing_helpers(mp)
        others = [pid for pid in _descendants(os.getpid()) if pid not in {c.pid for c in children} | helpers]
        _signal_all(others, signal.SIGTERM)
        start = time.monotonic()
        deadline, ray_deadline = start + grace, start + min(grace, RAY_GRACE_S)
        for child in children:
            child.join(max(0.0, deadline - time.monotonic()))
        ray = {pid for pid in others if _is_ray(pid)}
        while time.monotonic() < deadline and any(
                _running(pid) for pid in others if pid not in ray or time.monotonic() < ray_deadline):
            time.sleep(0.05)
        for child in children:
            if child.is_alive():
                child.kill()
                child.join(1.0)
        _signal_all([pid for pid in _descendants(os.getpid()) if pid not in helpers], signal.SIGKILL)
        if children:  # release the pool's named semaphores now (the exit skips their finalizers)
            mp.util._run_finalizers(0)
    except Exception:  # leaving is what matters
        pass


def _multiprocessing_helpers(mp) -> set[int]:
    """multiprocessing's resource tracker and fork server: they leave by themselves when this process
    does, and killing the tracker first makes the pool's clean-up relaunch it and print tracebacks."""
    if mp is None:
        return set()
    tracker = getattr(getattr(sys.modules.get("multiprocessing.resource_tracker"), "_resource_tracker", None),
                      "_pid", None)
    server = getattr(getattr(sys.modules.get("multiprocessing.forkserver"), "_forkserver", None),
                     "_forkserver_pid", None)
    return {pid for pid in (tracker, server) if pid}


def _descendants(root: int) -> list[int]:
    """Every live process below `root` in the process tree (Linux /proc; empty elsewhere)."""
    try:
        entries = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []
    children: dict[int, list[int]] = {}
    for pid in entries:
        fields = _stat(pid)
        if fields and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _is_ray(pid: int) -> bool:
    """A process of Ray's own (raylet, GCS, an agent, a worker: `ray::...`), by its command line."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            text = cmdline.read(4096).decode(errors="replace")
    except OSError:
        return False
    return text.startswith("ray::") or f"{os.sep}ray{os.sep}" in text


def _running(pid: int) -> bool:
    fields = _stat(pid)
    return bool(fields) and fields[0] != "Z"


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state, parent, ...); empty when gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def exit_interrupted() -> None:
    """Stop any worker processes, write the one-line message and leave with code 130, now (from
    any thread)."""
    _exit_lock.acquire(timeout=2.0)
    stop_children()
    text = "interrupted"
    if _state["message"] is not None:
        try:
            text = _state["message"]()
        except Exception:  # the message is best effort; leaving is what matters
            pass
    try:
        sys.stdout.flush()
    except Exception:
        pass
    os.write(2, f"error: {text}\n".encode())
    os._exit(130)


def _handler(signum, frame) -> None:
    if _state["shielded"]:
        _state["held"] = True
        return
    if _state["deferred"]:
        _state["pending"] = False
        raise KeyboardInterrupt
    exit_interrupted()


def _watch(fd: int) -> None:
    while True:
        try:
            data = os.read(fd, 16)
        except OSError:
            return
        if not data:
            return
        if not any(byte in SIGNALS for byte in data):
            continue
        if _state["shielded"]:
            _state["held"] = True
            continue
        if not _state["deferred"] or _state["pending"]:
            exit_interrupted()
        _state["pending"] = True


def reclaim() -> None:
    """Take SIGINT and SIGTERM back after a library installed its own C-level handlers (Ray's driver
    aborts on SIGTERM), when `install` has run; the watcher and its wakeup pipe stay as they are."""
    if _state.get("installed"):
        for signum in SIGNALS:
            signal.signal(signum, _handler)


def install() -> None:
    """Route SIGINT and SIGTERM of this process through the two regimes above (main thread
    only; the command line calls it first thing)."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    os.set_inheritable(read_fd, False)
    os.set_inheritable(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    for signum in SIGNALS:
        signal.signal(signum, _handler)
    _state["installed"] = True
    threading.Thread(target=_watch, args=(read_fd,), name="coocflow-interrupts", daemon=True).start()
