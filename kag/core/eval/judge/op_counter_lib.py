"""kag's operator counter: a small C++ library on ATen's RecordFunction, built and loaded by the judge.

The guards read which PyTorch operators ran inside the candidate's calls of forward (or on a thread
the solution started) and how many: counts, never timestamps. torch.profiler's session records every
operator as a timed event through Kineto, and on an H200 host that made a small kernel's call 22-23 us
of CPU against 15-16 us bare (bench/results/2026-11-29-opcounter-h200); a call whose path is longer
than its kernel is timed as its path. This library keeps one global RecordFunction callback that
counts a name under a lock, and nothing else: the same call took 16-18 us with it and kag's kernel
recorder together. It also pushes and pops the kernel recorder's correlation id for each call (the
CUPTI entry points are handed to it), so a call crosses ctypes twice, not four times.

Trusted side: the source is kag's (``SOURCE``), compiled here by the judge with the host's C++
compiler against the torch it imported, kept signed in the user's store (``counter_root``, its own
key, like the precompiled header), and loaded by the judge from a copy in its private temp folder
whose bytes it checked, **before** it forks the candidate and the baseline runner: both sides get the
same mapped library and neither can swap it. What the library counts runs in those processes
(untrusted side, kag.core.eval.candidate.op_counter): a report, as the profiler's was.

Where no C++ compiler or no torch headers are found, or ``KAG_OBSERVER=profiler``, nothing is loaded
and the observer runs torch.profiler's session as before (both sides alike).
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from kag.core.trust import integrity

SOURCE = r"""
// kag's operator counter (kag.core.eval.judge.op_counter_lib): counts, no events, no timestamps.
#include <ATen/record_function.h>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

namespace {
enum Where { IN_CALL = 0, ON_THREAD = 1, IN_POST = 2, PLACES = 3 };
enum State { OUTSIDE = 0, CALL = 1, POST = 2, NULL_CALL = 3 };
const char MARKER[] = "kag::forward";
const size_t MAX_NAME = 200;  // longer names are cut (a name is reported on one line, control characters replaced)
std::atomic<bool> owned{false};
std::thread::id owner;  // the thread that first started the counter (the harness's); set once
std::atomic<long> handle{0};
int state = OUTSIDE;  // the owner's (only the owner changes it)
bool emitting = false;  // the owner is recording the harness's own marker (not a name the solution chose)
struct Entry { std::string name; long n; };
std::mutex mu;
std::unordered_map<const char*, Entry> by_pointer[PLACES];  // the fast path: a name's storage
std::map<std::string, long> spilled[PLACES];  // names whose storage came to hold another name
std::atomic<long> markers{0}, calls_begun{0}, calls_ended{0}, nulls_begun{0}, nulls_ended{0};
std::atomic<long> broken{0};  // entry points used out of order or from another thread: never reset
typedef int (*push_fn)(int, uint64_t);
typedef int (*pop_fn)(int, uint64_t*);
push_fn push = nullptr;
pop_fn pop = nullptr;
int external_kind = 0;
uint64_t popped = 0;

bool on_owner() { return owned.load() && std::this_thread::get_id() == owner; }

std::string clean(const char* name) {
  std::string out(name, strnlen(name, MAX_NAME));
  for (auto& c : out) if ((unsigned char)c < 0x20 || (unsigned char)c == 0x7f || (unsigned char)c >= 0x80) c = '?';
  return out;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  int where;
  if (on_owner()) {
    if (emitting) {
      if (state == CALL) markers.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    if (state == CALL) where = IN_CALL;
    else if (state == POST) where = IN_POST;
    else return nullptr;
  } else {
    where = ON_THREAD;
  }
  const char* name = fn.name();
  if (name == nullptr) return nullptr;
  std::lock_guard<std::mutex> guard(mu);
  auto& table = by_pointer[where];
  auto it = table.find(name);
  if (it == table.end()) {
    table.emplace(name, Entry{clean(name), 1});
  } else if (std::strncmp(it->second.name.c_str(), name, MAX_NAME) == 0 || it->second.name == clean(name)) {
    it->second.n++;
  } else {  // freed and reused storage: keep what it counted under its own name
    spilled[where][it->second.name] += it->second.n;
    it->second = Entry{clean(name), 1};
  }
  return nullptr;
}

void marker() {  // a range of the harness's own inside the call: seen only while the callback is on
  at::RecordFunction guard(at::RecordScope::USER_SCOPE);
  emitting = true;
  if (guard.isActive()) guard.before(MARKER);
  emitting = false;
}

bool refused() {  // an entry point called from a thread that is not the harness's
  if (on_owner()) return false;
  broken.fetch_add(1);
  return true;
}
}  // namespace

extern "C" int kag_counter_start(void* push_entry, void* pop_entry, int kind) {
  bool expected = false;
  if (owned.compare_exchange_strong(expected, true)) owner = std::this_thread::get_id();
  if (refused()) return 1;
  if (handle.load() != 0 || state != OUTSIDE) {  // a session running, or a call: not the harness's start
    broken.fetch_add(1);
    return 1;
  }
  std::lock_guard<std::mutex> guard(mu);
  for (int i = 0; i < PLACES; i++) { by_pointer[i].clear(); spilled[i].clear(); }
  markers = calls_begun = calls_ended = nulls_begun = nulls_ended = 0;
  push = (push_fn)push_entry;
  pop = (pop_fn)pop_entry;
  external_kind = kind;
  handle = (long)at::addGlobalCallback(at::RecordFunctionCallback(on_start).needsInputs(false).needsOutputs(false));
  return handle.load() != 0 ? 0 : 1;
}

extern "C" void kag_counter_stop() {
  if (refused()) return;
  if (state != OUTSIDE) broken.fetch_add(1);
  if (handle.load() != 0) at::removeCallback((at::CallbackHandle)handle.load());
  handle = 0;
  state = OUTSIDE;
}

// a call of forward (id > 0: the kernel recorder's id for it) or a null call (null != 0), each as costly
extern "C" void kag_call_begin(uint64_t id, int null_call) {
  if (refused()) return;
  if (state != OUTSIDE) broken.fetch_add(1);
  (null_call ? nulls_begun : calls_begun).fetch_add(1);
  if (push != nullptr) push(external_kind, id);
  state = null_call ? NULL_CALL : CALL;
  marker();
}

extern "C" void kag_call_end() {
  if (refused()) return;
  if (state == CALL) calls_ended.fetch_add(1);
  else if (state == NULL_CALL) nulls_ended.fetch_add(1);
  else broken.fetch_add(1);
  marker();
  state = OUTSIDE;
  if (pop != nullptr) pop(external_kind, &popped);
}

// the hand-over of an output, between calls only (a call that ends its own state here is still in its call)
extern "C" void kag_post(int on) {
  if (refused()) return;
  if (state == OUTSIDE || state == POST) state = on ? POST : OUTSIDE;
  else broken.fetch_add(1);
}

// the totals first ("<name><TAB><TAB><count>"), then "place<TAB>name<TAB>count" lines, then "end<TAB><TAB><lines>";
// the bytes it needs, written up to size
extern "C" long kag_counter_report(char* out, long size) {
  std::lock_guard<std::mutex> guard(mu);
  static const char* places[PLACES] = {"call", "thread", "post"};
  std::string text;
  long lines = 0;
  for (auto& kv : {std::make_pair("markers", markers.load()), std::make_pair("calls_begun", calls_begun.load()),
                   std::make_pair("calls_ended", calls_ended.load()), std::make_pair("nulls_begun", nulls_begun.load()),
                   std::make_pair("nulls_ended", nulls_ended.load()), std::make_pair("broken", broken.load())}) {
    text += std::string(kv.first) + "\t\t" + std::to_string(kv.second) + "\n";
    lines++;
  }
  for (int i = 0; i < PLACES; i++) {
    std::map<std::string, long> merged(spilled[i]);
    for (auto& kv : by_pointer[i]) merged[kv.second.name] += kv.second.n;
    for (auto& kv : merged) {
      text += std::string(places[i]) + "\t" + kv.first + "\t" + std::to_string(kv.second) + "\n";
      lines++;
    }
  }
  text += "end\t\t" + std::to_string(lines) + "\n";
  long n = (long)text.size();
  if (out != nullptr && size > n) {
    std::memcpy(out, text.data(), (size_t)n);
    out[n] = 0;
  }
  return n;
}
"""
KIND = "op-counter"
OFF = "profiler"  # KAG_OBSERVER=profiler: no counter; torch.profiler's session records the operators
COMPILE_TIMEOUT_S = 240.0


def counter_root() -> Path:
    """``$KAG_OP_COUNTER_DIR``, else ``$XDG_CACHE_HOME/kag-op-counter``: one per user (it depends on
    the compiler and torch only), with its own key."""
    if os.environ.get("KAG_OP_COUNTER_DIR"):
        return Path(os.environ["KAG_OP_COUNTER_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kag-op-counter"


def compile_command(src: Path, out: Path) -> list[str] | None:
    """g++ (``$CXX``) against the torch this process imported: its headers, its C++ ABI, its
    libraries (already mapped when the library is loaded). None where torch has no headers."""
    import torch
    from torch.utils.cpp_extension import include_paths, library_paths

    includes = [p for p in include_paths() if os.path.isdir(p)]
    if not includes:
        return None
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", 1))
    return [os.environ.get("CXX", "g++"), "-O2", "-shared", "-fPIC", "-std=c++17", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
            *[f"-I{p}" for p in includes], str(src), "-o", str(out),
            *[f"-L{p}" for p in library_paths()], "-lc10", "-ltorch_cpu"]


def library_name() -> str:
    """The store's name for the library of this source, compiler and torch."""
    import torch

    cxx = os.environ.get("CXX", "g++")
    text = "\0".join([SOURCE, cxx, shutil.which(cxx) or "", torch.__version__, os.path.dirname(torch.__file__)])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _compile() -> bytes | None:
    with tempfile.TemporaryDirectory(prefix="kag-op-counter-") as work:
        src, out = Path(work) / "op_counter.cpp", Path(work) / "op_counter.so"
        src.write_text(SOURCE, encoding="utf-8")
        command = compile_command(src, out)
        if command is None:
            return None
        try:
            done = subprocess.run(command, capture_output=True, timeout=COMPILE_TIMEOUT_S, cwd=work)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.read_bytes() if done.returncode == 0 and out.exists() else None


def library_bytes(root: Path | None = None) -> tuple[bytes | None, str]:
    """The signed library's bytes (compiled and stored on first use), or None and why not."""
    root = root or counter_root()
    try:
        key = integrity.load_key(integrity.ensure_dir(root))
        name = library_name()
        path, mac = root / f"{name}.so", root / f"{name}.so{integrity.MAC_SUFFIX}"
        data = _verified(key, name, path, mac)
        if data is not None:
            return data, "stored"
        fd = os.open(root / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, integrity.LOCK_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # one compile per host; the others wait and read it
            data = _verified(key, name, path, mac)
            if data is not None:
                return data, "stored"
            data = _compile()
            if data is None:
                return None, "the operator counter did not compile (no C++ compiler or no torch headers)"
            integrity.atomic_write(path, data)
            integrity.atomic_write(mac, integrity.sign(key, KIND, name, data).encode())
            return data, "compiled"
        finally:
            os.close(fd)
    except (OSError, integrity.IntegrityError) as exc:
        return None, f"the operator counter's store is unusable: {exc}"


def _verified(key: bytes, name: str, path: Path, mac: Path) -> bytes | None:
    try:
        data, signed = path.read_bytes(), mac.read_text()
    except OSError:
        return None
    return data if integrity.verify(key, KIND, name, data, signed.strip()) else None


def load(root: Path | None = None, folder: Path | None = None) -> tuple[Any, str]:
    """The library loaded into this process from checked bytes, or None and why not. The bytes are
    written to ``folder`` (the judge's own temp folder; default: a new one), mode 0500 (the candidate,
    uid 0 without capabilities, cannot write it, nor chmod it through its filter), read back and
    checked again, and loaded from there; the file goes to kag.core.trust.provenance.HARNESS_LIBRARIES
    by path, device and inode (its code is the observer's, in the CPU samples). Not from
    a memfd or a deleted file: on the 2-core VM that made the confined candidate's calls 5x slower
    (relu on the CPU: 9.9-12.5 ms against 1.7 ms loaded from a file)."""
    if os.environ.get("KAG_OBSERVER") == OFF:
        return None, f"KAG_OBSERVER={OFF}"
    data, how = library_bytes(root)
    if data is None:
        return None, how
    try:
        if folder is None:  # (not multiprocessing's: a child forked after would inherit it as its own)
            folder = Path(tempfile.mkdtemp(prefix="kag-opc-"))
        path = Path(folder) / f"kag-op-counter-{library_name()}.so"
        if not path.exists():  # (loaded before in this process: the same bytes, checked below)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o500)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        if path.read_bytes() != data:
            return None, f"{path} changed as it was written"
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        return None, f"the operator counter did not load: {exc}"
    from kag.core.trust.provenance import add_harness_library

    add_harness_library(str(path))
    return lib, how
