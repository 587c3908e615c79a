"""Run a command as the child of a process that reaps its orphans at once (scripts/test runs
pytest under it).

QEMU guests that libvirt starts in the tests are daemons: when they exit, they are reparented
to PID 1 until someone reaps them, and libvirt's destroy waits for the PID to vanish (it polls
kill(pid, 0), which a zombie still answers). An init that reaps late (the sandboxes CI runs in
take about 1.4 s) makes every destroy that long: two thirds of the time of a paused start in
tests/test_embed_start.py. As the child subreaper (prctl(2)) of everything the command starts,
this process is where those orphans go, and it reaps each as soon as it ends.

    python scripts/_subreaper.py COMMAND [ARG...]      exit status: COMMAND's (128+N for signal N)
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: _subreaper.py COMMAND [ARG...]", file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    # Not Linux, or refused: the command runs all the same, only slower where init reaps late.
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    # Ctrl-C reaches the command through the terminal's process group: let it decide how to end.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, lambda received, _frame: os.kill(child, received))
    while True:
        pid, status = os.wait()  # the command, or an orphan of it: reaped either way
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
