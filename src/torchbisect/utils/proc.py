"""The one helper that runs subprocesses: echoes the command, captures output, raises a typed error.

Nothing a command starts may outlive it, hang us, or outlive torchbisect:

* each command runs in its own process group and carries a token in its environment
  (`TORCHBISECT_RUN`), which its descendants inherit even when they start sessions of their own;
* output is read by a thread, so the deadline holds even when a daemon keeps the pipe open: when
  the command exits (or its time is up) we wait `grace` seconds for the pipe, then end the group
  and every process that carries the token, and judge the command by its own exit status;
* a watchdog process (`_WATCHDOG`) learns each group and the token of this torchbisect process
  (`TORCHBISECT_OWNER`); when we die — even by kill -9 — its stdin reaches EOF and it kills them,
  then runs the clean-ups registered with `at_end` (the docker backend removes its containers);
* a command starts with SIGINT at its default even when torchbisect ignores it, so the SIGINT
  that stops a run reaches it (`_sigint_default`);
* output is drained as it comes but only its first and last `KEEP_BYTES` are kept (`Kept`): a
  probe that prints 2 GB costs neither our memory nor a 2 GB log, and the kept text says what was
  cut; it is masked (`masking.mask`) before anyone reads it or it reaches a log;
* a command whose output is data, not a message (`git log` of 100,000 commits, whose subjects and
  paths must stay the commit's), writes its stdout whole into a file (`stdout=PATH`): neither cut
  nor masked, and never logged; only its stderr is kept as above.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..errors import CommandFailed
from ..masking import at_cut, mask
from . import files

Echo = Callable[[str], None]
OWNER_VAR, RUN_VAR = "TORCHBISECT_OWNER", "TORCHBISECT_RUN"
_OWNER = uuid.uuid4().hex  # this torchbisect process; children of children still carry it
GRACE = 2.0  # seconds the pipe may stay open after the command exited
KEEP_BYTES = 2 * 1024 * 1024  # of a command's output, kept from its start and from its end
_READ = 1 << 20


@dataclass(frozen=True, kw_only=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    output: str  # stdout and stderr, interleaved
    seconds: float


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    base_env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
    log: Path | None = None,
    echo: Echo | None = None,
    check: bool = True,
    grace: float = GRACE,
    stdout: Path | None = None,
) -> Completed:
    """Run `argv`, appending its output to `log`; raise CommandFailed on failure when `check`.

    `stdout`: a file that receives the command's stdout as it is (module docstring); `output`
    is then its stderr alone.

    `env` entries are added to `base_env` (default: the current environment), not substituted
    for it: a probe passes `probe_env.allowed()` as its base, so it sees no credentials.
    """
    argv = [str(a) for a in argv]
    line = shlex.join(argv)
    if echo:
        echo(f"$ {line}")
    token = uuid.uuid4().hex
    base = os.environ if base_env is None else base_env
    full_env = {**base, **(env or {}), OWNER_VAR: _OWNER, RUN_VAR: token}
    start = time.monotonic()
    try:
        with contextlib.ExitStack() as opened:
            data = opened.enter_context(open(stdout, "wb")) if stdout is not None else None
            child = subprocess.Popen(
                argv,
                env=full_env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=data or subprocess.PIPE,
                stderr=subprocess.PIPE if data else subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_sigint_default(),
            )
    except FileNotFoundError:
        raise CommandFailed(argv, 127, f"{argv[0]}: command not found") from None
    running = _Running(child, token)
    try:
        timed_out = running.wait(timeout, grace)
    except BaseException:  # KeyboardInterrupt: leave nothing running behind us
        running.end(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)
        raise
    finally:
        running.forget()
    output = running.output()
    _append(log, line, output)
    if timed_out:
        raise CommandFailed(argv, -1, output, timed_out=True)
    seconds = time.monotonic() - start
    if check and child.returncode != 0:
        raise CommandFailed(argv, child.returncode, output)
    return Completed(argv=tuple(argv), returncode=child.returncode, output=output, seconds=seconds)


def _sigint_default() -> Callable[[], None] | None:
    """What makes the child's SIGINT default again, when ours is ignored.

    An ignored signal stays ignored across exec (a handled one does not), so a torchbisect
    started with SIGINT ignored (a script's background job, nohup-like launchers) would start
    commands deaf to the SIGINT that stops them (`signal_all`), and every stop would wait for
    the SIGKILL fallback.  Popen's `restore_signals` resets only SIGPIPE/SIGXFSZ, hence a
    preexec function, set only then: it runs between fork and exec, which the subprocess docs
    call unsafe with threads, so the usual launch keeps Popen's fast path without it.  The
    command runs in a session of its own: no terminal's Ctrl-C reaches it either way."""
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        return None
    return _default_sigint


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class _Running:
    """A started command: its group, its token, and the thread that drains its output."""

    def __init__(self, child: subprocess.Popen[bytes], token: str):
        self.child, self.token, self._kept = child, token, Kept()
        # stderr alone when stdout goes to a file; run() always pipes one of the two
        self._pipe: IO[bytes] = child.stdout or child.stderr  # type: ignore[assignment]
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        _watchdog_say(f"+{child.pid}")
        with _LOCK:
            _LIVE.add(self)

    def wait(self, timeout: float | None, grace: float) -> bool:
        """Wait for the command (and its pipe, up to `grace` more); True when time ran out."""
        try:
            self.child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.end(signal.SIGKILL)
            self.child.wait()
            self._reader.join(grace)
            return True
        self._reader.join(grace)
        self.end(signal.SIGKILL)  # whatever it left behind: a daemon, a stuck worker
        self._reader.join(grace)
        return False

    def end(self, sig: int) -> None:
        _signal_group(self.child.pid, sig)
        for pid in holders(RUN_VAR, self.token):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def forget(self) -> None:
        with _LOCK:
            _LIVE.discard(self)
        _watchdog_say(f"-{self.child.pid}")
        if not self._reader.is_alive():  # a reader still blocked keeps its fd: never reused
            self._pipe.close()

    def output(self) -> str:
        text = self._kept.text()
        return text.replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads it

    def _drain(self) -> None:
        fd = self._pipe.fileno()
        with contextlib.suppress(OSError):
            while chunk := os.read(fd, _READ):
                self._kept.add(chunk)


class Kept:
    """The first and last `keep` bytes of a stream, and how many between them were dropped.

    Memory stays below 2 x `keep` (+ one chunk) however much comes; `text()` is the kept output,
    masked, with one line where the cut is that gives the count and the bound.
    """

    def __init__(self, keep: int = KEEP_BYTES) -> None:
        self.keep, self.cut = keep, 0
        self._head = bytearray()
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_bytes, self._given = 0, 0
        self._full_end: int | None = None  # where a full head is given out up to (new_lines)
        self._lock = threading.Lock()  # a reader still draining while the output is read

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self._add(chunk)

    def _add(self, chunk: bytes) -> None:
        room = self.keep - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self._tail.append(chunk)
        self._tail_bytes += len(chunk)
        while self._tail_bytes - len(self._tail[0]) >= self.keep:
            dropped = self._tail.popleft()
            self._tail_bytes -= len(dropped)
            self.cut += len(dropped)
        if self._tail_bytes > self.keep:  # trim the oldest chunk to the bound
            extra = self._tail_bytes - self.keep
            self._tail[0] = self._tail[0][extra:]
            self._tail_bytes -= extra
            self.cut += extra

    def text(self) -> str:
        """All that was kept, with the cut said where it is."""
        with self._lock:
            return mask(self._head_end(_decode(self._head)) + self._rest())

    def new_lines(self) -> str:
        """The complete lines of the head not given out before (a log written as it comes)."""
        with self._lock:
            full = len(self._head) >= self.keep
            # a full head ends where the cut may go: its last word waits for `rest`, which
            # masks it when a cut comes (`at_cut`)
            if full and self._full_end is None:  # a full head never changes: asked once
                self._full_end = _word_start(self._head)
            end = (
                self._full_end
                if full and self._full_end is not None
                else self._head.rfind(b"\n") + 1
            )
            text, self._given = _decode(self._head[self._given : end]), max(self._given, end)
        return mask(text)

    def rest(self) -> str:
        """What `new_lines` has not given out yet: the end of the head, the cut, the tail."""
        with self._lock:
            text = self._head_end(_decode(self._head[self._given :])) + self._rest()
            self._given = len(self._head)
        return mask(text)

    def _head_end(self, head: str) -> str:
        return at_cut(head, "")[0] if self.cut else head

    def _rest(self) -> str:
        tail = _decode(b"".join(self._tail))
        if not self.cut:
            return tail
        _, tail = at_cut("", tail)  # a token the cut goes through has lost its shape
        return (
            f"\n# torchbisect: {self.cut:,} bytes of output cut here (a command's output "
            f"is kept to its first and last {_mib(self.keep)})\n"
        ) + tail


def _word_start(data: bytearray) -> int:
    """Where the word `data` ends with begins (len(data) when it ends with no word), looked for
    no further back than `at_cut` masks: this runs on every chunk once the head is full."""
    end, bound = len(data), max(0, len(data) - _CUT_WORD)
    while end > bound and data[end - 1] in _WORD_BYTES:
        end -= 1
    return end


_CUT_WORD = 4096  # masking._LONGEST_SECRET: the most of a word cut in two that is masked


_WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+/=.-")


def _decode(data: bytes | bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")


def _mib(size: int) -> str:
    return f"{size / 1048576:g} MiB" if size >= 1048576 else f"{size:,} bytes"


_LIVE: set[_Running] = set()
_LOCK = threading.Lock()


def signal_all(sig: int) -> None:
    """Send `sig` to every running command and what it started (a stop from another thread)."""
    with _LOCK:
        running = list(_LIVE)
    for each in running:
        each.end(sig)


def holders(var: str, value: str) -> list[int]:
    """The processes of this user whose environment has `var=value` (read from /proc)."""
    needle, found = f"{var}={value}".encode(), []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as fh:
                    if needle in fh.read().split(b"\0"):
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


# -- the watchdog: ends what we started when we die, even by SIGKILL -------------------------------

_WATCHDOG = r"""
import json, os, signal, subprocess, sys
owner, groups, last = sys.argv[1], set(), []
for line in sys.stdin:
    line = line.strip()
    if line[:1] == "+": groups.add(int(line[1:]))
    elif line[:1] == "-": groups.discard(int(line[1:]))
    elif line[:1] == "!": last.append(json.loads(line[1:]))
needle = ("%s=%s" % (sys.argv[2], owner)).encode()
for group in groups:
    try: os.killpg(group, signal.SIGKILL)
    except OSError: pass
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != os.getpid():
        try:
            with open("/proc/%s/environ" % name, "rb") as fh:
                if needle in fh.read().split(b"\0"): os.kill(int(name), signal.SIGKILL)
        except OSError: pass
for argv in last:
    try: subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL, timeout=120)
    except Exception: pass
"""
_watch: subprocess.Popen[bytes] | None = None
_WATCH_LOCK = threading.Lock()


def at_end(argv: Sequence[str]) -> None:
    """Have the watchdog run `argv` once this torchbisect process has ended, however it ended
    (kill -9 included): for what is not a process of ours, such as a container."""
    _watchdog_say("!" + json.dumps([str(a) for a in argv]))


def _watchdog_say(line: str) -> None:
    """Tell the watchdog (started on first use, in a session of its own) about a group."""
    global _watch
    with _WATCH_LOCK:
        if _watch is None or _watch.poll() is not None or os.getpid() != _watch_pid:
            _start_watchdog()
        with contextlib.suppress(OSError, ValueError, AttributeError):  # None: none could start
            _watch.stdin.write(f"{line}\n".encode())  # type: ignore[union-attr]
            _watch.stdin.flush()  # type: ignore[union-attr]


_watch_pid = 0


def _start_watchdog() -> None:
    global _watch, _watch_pid
    env = {k: v for k, v in os.environ.items() if k not in (OWNER_VAR, RUN_VAR)}
    _watch_pid = os.getpid()
    try:
        _watch = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, _OWNER, OWNER_VAR],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    except OSError:
        _watch = None  # the commands still end with their timeouts; only kill -9 is unguarded


def _after_fork() -> None:
    """A forked child is another torchbisect: its own token, its own watchdog."""
    global _OWNER, _watch
    _OWNER, _watch = uuid.uuid4().hex, None
    _LIVE.clear()


os.register_at_fork(after_in_child=_after_fork)


def _append(log: Path | None, line: str, output: str) -> None:
    if log is None:
        return
    end = "" if not output or output.endswith("\n") else "\n"
    files.append(log, f"$ {mask(line)}\n{output}{end}")
