#!/usr/bin/env python3
"""CPU used by a loaded, idle model (issue 15: < 1 % of one core).

Starts `llm chat -m MODEL -t THREADS`, sends one short message (so that the
thread pool has run a prefill and a decode and its workers exist), waits for
the answer, then reads the process's user + system CPU time from
/proc/PID/stat (all threads) before and after SECONDS of idling, and prints
the CPU used as a percentage of one core. Ends the chat with an empty line.

  python3 bench/idle_cpu.py --llm build/llm --model M.gguf [--seconds 10] [-t 2]
"""

import argparse
import os
import subprocess
import sys
import time


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of the whole line; after the
    # command name, field 3 is index 0.
    return int(fields[11]) + int(fields[12])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llm", default="build/llm")
    ap.add_argument("--model", required=True)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("-t", "--threads", type=int, default=2)
    args = ap.parse_args()

    proc = subprocess.Popen([args.llm, "chat", "-m", args.model, "-t", str(args.threads), "-n", "4"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, bufsize=1)
    proc.stdin.write("hello\n")
    proc.stdin.flush()
    proc.stdout.readline()  # the answer (ends with a newline)
    time.sleep(1.0)  # let the pool's short spin end and stats print
    if proc.poll() is not None:
        # e.g. a model without a chat template: nothing was measured.
        sys.stderr.write(proc.stderr.read())
        print("llm chat exited with status %d before the idle period" % proc.returncode,
              file=sys.stderr)
        return 1
    hz = os.sysconf("SC_CLK_TCK")
    t0, c0 = time.monotonic(), cpu_ticks(proc.pid)
    time.sleep(args.seconds)
    t1, c1 = time.monotonic(), cpu_ticks(proc.pid)
    proc.stdin.write("\n")
    proc.stdin.close()
    proc.wait(timeout=60)
    used = (c1 - c0) / hz
    print("idle %.1f s: %.3f s of CPU = %.2f %% of one core (threads: %d)" % (
        t1 - t0, used, 100.0 * used / (t1 - t0), args.threads))


if __name__ == "__main__":
    sys.exit(main())
