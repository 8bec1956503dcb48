"""Run a command confined: ``python -m kag.core.trust.confine_exec --write DIR [--read PATH]...
[--protect PATH]... [--seccomp] -- COMMAND...``. Used for trusted tools on untrusted input (the
compiler, the linker) and for the agent's commands in the local sandbox.

Trusted side. A solution's sources steer what the compiler reads (``#include "/abs/path"``,
``.incbin``): under Landlock the compiler reads only the system, this Python installation (torch's
headers), CUDA and the build's own folder, and writes only there, so no source can pull the
evaluator's key, a cache or a host file into a module or an error message. Where the kernel has
no Landlock the command runs unconfined (``kag doctor`` says so).
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kag.core.trust.confine_exec")
    parser.add_argument("--write", action="append", default=[], help="folders the command may write")
    parser.add_argument("--read", action="append", default=[], help="more paths it may read")
    parser.add_argument("--protect", action="append", default=[], help="paths no read rule may cover")
    parser.add_argument("--hide", action="append", default=[],
                        help="files under the read paths that stay unreadable (NVRTC for a CUDA build)")
    parser.add_argument("--seccomp", action="store_true",
                        help="also refuse ptrace, process_vm_*, namespaces, bpf, io_uring, keyrings (fork/exec allowed)")
    parser.add_argument("--private-tmp", action="store_true",
                        help="empty /tmp, /run and /dev/shm but for the command's own folders (needs a mount "
                             "namespace: unshare -rnm); see kag.core.trust.private_mounts")
    parser.add_argument("--cover", action="append", default=[],
                        help="with --private-tmp: one more folder to empty (Ray's RAY_TMPDIR, say)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    from kag.core.trust import confine

    reads = confine.system_read_paths(args.protect) + args.read
    if args.private_tmp:  # before Landlock, which refuses mounts from then on
        from kag.core.trust.private_mounts import cover

        bridge = os.environ.get("KAG_BRIDGE")
        cover(args.write + reads + ([os.path.dirname(bridge)] if bridge else []), extra=args.cover)
    if confine.landlock_abi() > 0:
        confine.apply_landlock(confine.LandlockPolicy(read=tuple(reads + ["/proc/self"]), write=tuple(args.write),
                                                      devices=tuple(confine.device_paths(False)), scope_signals=True,
                                                      exclude=tuple(args.hide)))
    if args.seccomp and confine.arch() in confine.SYSCALLS:
        confine.apply_seccomp(no_exec=False, no_fork=False, allow_list=False)  # agent commands run any tool
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
