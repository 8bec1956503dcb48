"""The judge's handle on its candidate process: fork it confined, ring its doorbell, time its calls
with the judge's own clock, stop it between calls, read its replies through the allow-list.

Trusted side. The candidate runs only inside windows the judge measures: it is resumed (SIGCONT)
right before a request and stopped (SIGSTOP, confirmed with waitpid) right after the reply and,
on a GPU, after a probe kernel of the judge's has seen the GPU idle (so work it left queued runs
inside the window too). A window of calls is ``window``'s return value; kag.core.eval.judge.judge_timing
turns windows into times. The same handle drives the baseline runner (a child of the same kind,
unconfined, running only the task's own Model), so both sides are timed through one path.
"""

from __future__ import annotations

import mmap
import os
import select
import signal
import time
from typing import Any, Callable

from kag.core.eval.boundary import COUNT, OP_CALL, OP_END, OP_MSG, OP_NULL, WORD, pack
from kag.core.trust.isolation import ABORT_STATUS


MAX_TAIL_BYTES = 64 << 20  # where a window's outputs are: far less than this
SPIN_BELOW_S = 2e-4  # a sampler's stop due sooner than this is waited for spinning (a sleep wakes ~60 us late)


class CandidateFailure(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


HOST_MEMORY_CAP_BYTES = 64 << 30


def default_host_memory_bytes() -> int:
    """Half of this machine's RAM, at most 64 GiB: what one candidate may hold in private memory
    before it is killed as out of memory (the OOM killer would otherwise take the judge, or the
    machine). The cap: several candidates run at once, and on a 256 GiB host a candidate zero-filling
    memory took longer than its check's time limit to reach half (a timeout, not "oom"); more is
    ``EvalOptions.host_memory_gb``."""
    try:
        return min(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2, HOST_MEMORY_CAP_BYTES)
    except (ValueError, OSError):
        return 16 << 30


def anon_bytes(pids: list[int]) -> int:
    """Private resident memory (RssAnon) of ``pids`` (Linux /proc); shared memory, which carries
    tensors between judge and candidate, is not counted."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"RssAnon:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError, IndexError):
            continue
    return total


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _blank_fds(keep: set[int]) -> None:
    """Point every open descriptor not in ``keep`` at /dev/null (numbers stay taken, so a stale
    object closing one later cannot close something the child opened since)."""
    null = os.open(os.devnull, os.O_RDWR)
    for name in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []:
        fd = int(name)
        if fd in keep or fd == null:
            continue
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)


class CandidateProcess:
    """A forked, confined candidate. Its interpreter is the judge's (torch already imported), so it
    starts in milliseconds; ``prepare`` initialises its device while the judge loads the reference.
    """

    MEMORY_CHECK_INTERVAL_S = 0.5

    def __init__(self, output_fifo: str | None = None, plan: Any = None, host_memory_bytes: int | None = None):
        import multiprocessing

        from kag.core.eval.candidate.candidate import candidate_main
        from kag.core.trust.isolation import fork_in_namespace

        self.host_memory_bytes = host_memory_bytes or default_host_memory_bytes()
        self._memory_checked = 0.0
        self.plan = plan
        self.conn, child = multiprocessing.Pipe(duplex=True)
        go_r, self.go_w = os.pipe()
        self.done_r, done_w = os.pipe()
        self.bell = mmap.mmap(-1, 16)  # shared with the child (anonymous, inherited): the fast doorbell
        self.fast = False  # ring a window's later calls through the bell (the judge turns it on, on a GPU)
        keep = {0, 1, 2, child.fileno(), go_r, done_w}

        def run_child() -> None:
            _blank_fds(keep)
            candidate_main(child, go_r, done_w, output_fifo, plan, self.bell)

        from kag.core.trust.process_tree import descendants

        self._preexisting = set(descendants(os.getpid()))  # our other children: not the candidate's
        self.spare: set[int] = set()  # processes forked after it that its sweep must spare (the baseline runner)
        self.pid, self.pid_namespace = fork_in_namespace(run_child, bool(plan and plan.namespaces))
        self.serial = 0  # of the doorbell words (each window's answer must echo its own)
        child.close()
        os.close(go_r)
        os.close(done_w)
        os.set_blocking(self.done_r, False)
        self.exitcode: int | None = None
        self.stopped = False
        self.stop_sent = False
        self.spin = False  # poll for done (a GPU machine has cores to spare) instead of sleeping
        self.probe: Callable[[float], None] | None = None  # the judge's GPU-idle probe
        self.tail = b""  # the last answer's tail: where a window's outputs are
        self.end_s = 0.0  # the last timed window's end: its time, the calls' work done (``window``)
        self._mem: int | None = None

    # -- process state --------------------------------------------------------------------------
    def _reap(self, flags: int) -> bool:
        if self.exitcode is not None:
            return True
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:
            self.exitcode = -signal.SIGKILL
            return True
        if pid == 0:
            return False
        if os.WIFSTOPPED(status):
            self.stopped = True
            return False
        self.exitcode = os.waitstatus_to_exitcode(status)
        return True

    def is_alive(self) -> bool:
        return not self._reap(os.WNOHANG)

    def join(self, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._reap(os.WNOHANG):
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(0.005)

    def stop(self, confirm: bool = True) -> None:
        """SIGSTOP: once delivered, nothing of the candidate runs on a CPU until ``resume``. The
        signal stops the thread running in user space at once; ``confirm`` waits until every thread
        has stopped (a CUDA driver thread inside an ioctl takes a while: not part of any window)."""
        if self.exitcode is not None:
            return
        if not self.stop_sent:
            try:
                os.kill(self.pid, signal.SIGSTOP)
            except ProcessLookupError:
                self._reap(0)
                return
            self.stop_sent = True
        if confirm:
            while not self.stopped and not self._reap(os.WUNTRACED):
                pass

    def resume(self) -> None:
        if self.stop_sent and not self.stopped:
            self.stop()  # a stop must be complete before the next resume, or its report arrives late
        if self.stopped and self.exitcode is None:
            os.kill(self.pid, signal.SIGCONT)
        self.stopped = self.stop_sent = False

    def kill(self) -> None:
        from kag.core.trust.process_tree import sweep_descendants

        if self.exitcode is None:
            for target in ((self.pid,) if self.pid_namespace else (-self.pid, self.pid)):
                try:
                    os.kill(target, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        self.join(timeout=10)
        if not self.pid_namespace:  # no namespace to take its processes down: find them (the judge
            sweep_descendants(os.getpid(), spare=self._preexisting | self.spare)  # is their subreaper)

    def close(self, grace_s: float = 5.0) -> None:
        if self.exitcode is None and self.is_alive():
            try:
                self.resume()
                self.ring(OP_MSG)
                self.send(("exit", None))
            except CandidateFailure:
                pass
            self.join(timeout=grace_s)
        self.kill()
        fds, (self.go_w, self.done_r, self._mem) = (self.go_w, self.done_r, self._mem), (None, None, None)
        for fd in fds:  # once: a second close must not close a descriptor opened since under that number
            if fd is None:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
        self.conn.close()

    # -- the doorbell ---------------------------------------------------------------------------
    def ring(self, op: int, calls: int = 0) -> bytes:
        self.serial += 1
        word = pack(op, calls, self.serial)
        try:
            os.write(self.go_w, word)
        except OSError:
            raise self._closed("while being called") from None
        return word

    def wait_done(self, word: bytes, timeout_s: float, phase: str,
                  sampler: Callable[[], float | None] | None = None, limit_s: float | None = None) -> None:
        """Until the candidate rings ``word`` back (spinning on a GPU machine, sleeping otherwise),
        with its answer's tail (``self.tail``: where a window's outputs are). ``sampler``, if
        given, is called while waiting and returns how long to wait before its next call (None: no
        more). ``limit_s``: the limit a timeout names (default ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        next_sample = time.perf_counter() + (sampler() or 0.0) if sampler is not None else None
        got = b""
        need = WORD.size + COUNT.size
        while True:
            try:
                chunk = os.read(self.done_r, need - len(got))
                if not chunk:
                    raise self._closed(f"during {phase}")
                got += chunk
                if len(got) == WORD.size + COUNT.size == need:
                    if got[:WORD.size] != word:
                        raise CandidateFailure("exception", f"{phase}: the candidate answered another call")
                    length = COUNT.unpack(got[WORD.size:])[0]
                    if length > MAX_TAIL_BYTES:
                        raise CandidateFailure("exception", f"{phase}: the candidate's answer was too long")
                    need += length
                if len(got) == need:
                    self.tail = got[WORD.size + COUNT.size:]
                    return
                continue
            except BlockingIOError:
                pass
            if self.conn.poll(0):  # an error report instead of done
                self.receive(1.0, phase)
                raise CandidateFailure("exception", f"{phase}: unexpected message from the candidate")
            if next_sample is not None and sampler is not None and time.perf_counter() >= next_sample:
                wait = sampler()
                next_sample = None if wait is None else time.perf_counter() + wait
            left = None if next_sample is None else next_sample - time.perf_counter()
            if not self.spin and (left is None or left >= SPIN_BELOW_S):  # a stop due sooner than a sleep
                pause = 0.05 if left is None else min(0.05, left)  # can wake is waited for spinning
                select.select([self.done_r, self.conn], [], [], pause)
            if time.monotonic() > deadline or not self._alive_and_within_memory(phase):
                if time.monotonic() > deadline:
                    self.kill()
                    raise CandidateFailure("timeout", f"{phase} did not finish within {limit_s or timeout_s:g} s; "
                                                      f"the candidate process was killed")
                raise self._closed(f"during {phase}")

    def ring_bell(self, op: int, calls: int = 0) -> bytes:
        """A doorbell word through the shared bell (a window's calls after its first, its end)."""
        self.serial += 1
        word = pack(op, calls, self.serial)
        WORD.pack_into(self.bell, 0, WORD.unpack(word)[0])
        return word

    def wait_bell(self, word: bytes, deadline: float, phase: str, sampler: Callable[[], float | None] | None,
                  limit_s: float) -> None:
        """Until the candidate writes ``word`` back into the bell (polling it), watching for an
        error report, its death and the deadline as ``wait_done`` does."""
        want = WORD.unpack(word)[0]
        next_sample = time.perf_counter() + (sampler() or 0.0) if sampler is not None else None
        spins = 0
        while WORD.unpack_from(self.bell, 8)[0] != want:
            spins += 1
            if spins & 0x3FF:
                continue
            if self.conn.poll(0):  # an error report instead of done
                self.receive(1.0, phase)
                raise CandidateFailure("exception", f"{phase}: unexpected message from the candidate")
            if next_sample is not None and sampler is not None and time.perf_counter() >= next_sample:
                wait = sampler()
                next_sample = None if wait is None else time.perf_counter() + wait
            if time.monotonic() > deadline:
                self.kill()
                raise CandidateFailure("timeout", f"{phase} did not finish within {limit_s:g} s; "
                                                  f"the candidate process was killed")
            if not self._alive_and_within_memory(phase):
                raise self._closed(f"during {phase}")

    def window(self, calls: int, timeout_s: float, phase: str, null: bool = False,
               sampler: Callable[[], float | None] | None = None, end_timed: bool = True) -> float:
        """``calls`` calls of forward back to back (or the null path), resumed before and stopped
        after; returns the window in seconds on the judge's clock: from the first doorbell to the
        end's reply and the stop, and on a GPU to the moment the judge's probe sees the GPU idle (the
        work it left queued). Each call is rung on its own, and the end after the last, so the
        candidate learns a window's size only when it ends. ``sampler``: see ``wait_done``.

        On a GPU the child is stopped at its last call's answer and the work it queued waited out
        before its end is rung (resumed again), so the end's own time (``end_s``, from there to the
        window's end) holds no work of the calls. ``end_timed=False`` (a short window): the window
        ends there, and its end is rung after, untimed. The end is where the child learns how many
        calls its window had; timed, it could delay short windows' ends only and shrink the
        long-minus-short difference (kag.core.eval.judge.judge_timing ``WindowTiming.base_s``)."""
        self.resume()
        t0 = time.perf_counter()
        deadline = time.monotonic() + timeout_s
        first = self.ring(OP_NULL) if null else self.ring(OP_CALL, 0)  # a null window: one call of nothing
        calls = 1 if null else calls
        if self.fast:
            self.wait_bell(first, deadline, phase, sampler, timeout_s)
            for j in range(1, calls):
                self.wait_bell(self.ring_bell(OP_CALL, j), deadline, phase, sampler, timeout_s)
        else:
            self.wait_done(first, max(0.0, deadline - time.monotonic()), phase, sampler, timeout_s)
            for j in range(1, calls):
                self.wait_done(self.ring(OP_CALL, j), max(0.0, deadline - time.monotonic()), phase, sampler, timeout_s)
        if end_timed and self.probe is None:  # the CPU: nothing queued, the end follows at once
            ended = time.perf_counter()
            self.end_window(deadline, phase, sampler, timeout_s)
            self.stop(confirm=False)
            window = time.perf_counter() - t0
            self.end_s = time.perf_counter() - ended
            self.stop()
            return window
        self.stop(confirm=False)  # at the last answer: nothing is launched after it
        if self.probe is not None:
            self.probe(timeout_s)
        drained = time.perf_counter()
        self.stop()
        self.resume()
        if not end_timed:
            self.end_window(deadline, phase, None, timeout_s)
            self.stop()
            return drained - t0
        self.end_window(deadline, phase, sampler, timeout_s)
        self.stop(confirm=False)
        self.probe(timeout_s)  # what the end launched
        window = time.perf_counter() - t0
        self.end_s = time.perf_counter() - drained
        self.stop()
        return window

    def end_window(self, deadline: float, phase: str, sampler: Callable[[], float | None] | None,
                   limit_s: float) -> None:
        """Ring a window's end and wait for its answer (the tail: where its outputs are)."""
        word = self.ring_bell(OP_END) if self.fast else self.ring(OP_END)
        self.wait_done(word, max(0.0, deadline - time.monotonic()), phase, sampler, limit_s)

    def exchange(self, msg: tuple, timeout_s: float, phase: str, expect: str | None = None,
                 stop: bool = True) -> tuple[tuple, float]:
        """Send a request, wait for its reply; (reply, window in seconds, measured like ``call``)."""
        self.resume()
        t0 = time.perf_counter()
        self.ring(OP_MSG)
        self.send(msg)
        reply = self.receive(timeout_s, phase)
        if expect is not None and reply[0] != expect:
            raise CandidateFailure("exception", f"{phase}: unexpected reply {reply[0]!r}")
        if stop:
            self.stop(confirm=False)
        if self.probe is not None:
            self.probe(timeout_s)
        window = time.perf_counter() - t0
        if stop:
            self.stop()
        return reply, window

    def read_memory(self, address: int, size: int) -> bytes:
        """``size`` bytes of the (stopped) candidate's memory, read from outside it."""
        if self._mem is None:
            self._mem = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY)
        chunks, done = [], 0
        while done < size:
            chunk = os.pread(self._mem, min(size - done, 64 << 20), address + done)
            if not chunk:
                raise OSError(f"short read of the candidate's memory at {address + done:#x}")
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)

    # -- the control channel --------------------------------------------------------------------
    def send(self, msg: tuple) -> None:
        from kag.core.eval.candidate.channel import dumps

        try:
            self.conn.send_bytes(dumps(msg))
        except (OSError, EOFError):
            raise self._closed("while receiving a request") from None

    def receive(self, timeout_s: float, phase: str) -> tuple:
        from kag.core.eval.boundary import MAX_MESSAGE_BYTES, RefusedObject, restricted_loads

        deadline = time.monotonic() + timeout_s
        while True:
            if self.conn.poll(min(0.2, max(0.0, deadline - time.monotonic()))):
                try:
                    data = self.conn.recv_bytes(MAX_MESSAGE_BYTES)
                except (EOFError, OSError):
                    raise self._closed(f"during {phase}") from None
                try:
                    msg = restricted_loads(data)
                except RefusedObject as exc:
                    raise CandidateFailure("exception", f"{phase}: {exc}") from None
                except Exception as exc:  # noqa: BLE001 - e.g. shared memory of a dead process
                    raise CandidateFailure("crash", f"{phase}: unreadable message from the candidate "
                                                    f"({type(exc).__name__}: {exc})") from None
                if not isinstance(msg, tuple) or not msg or not isinstance(msg[0], str):
                    raise CandidateFailure("exception", f"{phase}: malformed message from the candidate")
                if msg[0] == "error":
                    kind = msg[1] if msg[1] in ("oom", "cuda_error", "exception") else "exception"
                    raise CandidateFailure(kind, str(msg[2]))
                return msg
            if not self._alive_and_within_memory(phase):
                raise self._closed(f"during {phase}")
            if time.monotonic() >= deadline:
                self.kill()
                raise CandidateFailure("timeout", f"{phase} did not finish within {timeout_s:g} s; "
                                                  f"the candidate process was killed")

    def _alive_and_within_memory(self, phase: str) -> bool:
        if not self.is_alive() and not self.conn.poll(0):
            return False
        now = time.monotonic()
        if now - self._memory_checked >= self.MEMORY_CHECK_INTERVAL_S:
            self._memory_checked = now
            from kag.core.trust.process_tree import descendants

            used = anon_bytes([self.pid, *descendants(self.pid)])
            if used > self.host_memory_bytes:
                self.kill()
                raise CandidateFailure("oom", f"{phase}: the candidate held {used / 2**30:.1f} GiB of host memory, "
                                              f"over the limit of {self.host_memory_bytes / 2**30:.1f} GiB, and was "
                                              f"killed")
        return True

    def _closed(self, when: str) -> CandidateFailure:
        self.join(timeout=5)
        code = self.exitcode
        if code is None:
            self.kill()
            return CandidateFailure("crash", f"the candidate closed its channel {when} and was killed")
        if code < 0:
            hint = " (host out of memory?)" if code == -signal.SIGKILL else ""
            return CandidateFailure("crash", f"the candidate process crashed {when}: killed by "
                                             f"{_signal_name(code)}{hint}")
        if code == ABORT_STATUS and self.pid_namespace:
            return CandidateFailure("crash", f"the candidate process crashed {when}: killed by SIGABRT (abort)")
        return CandidateFailure("crash", f"the candidate process exited with status {code} {when} before "
                                         f"answering (os._exit or sys.exit in the solution?)")
