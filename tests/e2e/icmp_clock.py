#!/usr/bin/env python3
"""Bounds this machine's CLOCK_REALTIME minus another machine's, as its kernel
reports it in ICMP timestamp replies (RFC 792 types 13 and 14; Linux answers
them in the kernel, with both stamps its CLOCK_REALTIME in whole milliseconds
since midnight UT). A reply stamped T was made between our send (t0) and our
receive (t1), by a clock then in [T, T + 1 ms): the offset lies in
(t0 - T - 1 ms, t1 - T]. Each probe's span holds it, so their intersection does.

Usage: icmp_clock.py ADDRESS [PROBES]   (root: a raw socket)
Prints 'LO HI N': the bound in nanoseconds and how many probes answered.
Exit status 1 if none answered within 1 s each, or the spans do not meet.
"""
import os
import select
import socket
import struct
import sys
import time

DAY_MS = 86_400_000
MS = 1_000_000


def checksum(b: bytes) -> int:
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def realtime() -> int:
    return time.clock_gettime_ns(time.CLOCK_REALTIME)


def main() -> int:
    dest = sys.argv[1]
    probes = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = os.getpid() & 0xFFFF
    lo, hi, got = None, None, 0
    for seq in range(probes):
        t0 = realtime()
        body = struct.pack("!BBHHHIII", 13, 0, 0, ident, seq, (t0 // MS) % DAY_MS, 0, 0)
        sock.sendto(body[:2] + struct.pack("!H", checksum(body)) + body[4:], (dest, 0))
        deadline = time.monotonic() + 1.0
        while (left := deadline - time.monotonic()) > 0 and select.select([sock], [], [], left)[0]:
            data = sock.recv(2048)
            t1 = realtime()
            ihl = (data[0] & 0x0F) * 4
            if len(data) < ihl + 20:
                continue
            kind, _, _, rid, rseq, _, _, stamp = struct.unpack_from("!BBHHHIII", data, ihl)
            if kind != 14 or rid != ident or rseq != seq:
                continue
            if stamp & 0x80000000 or stamp >= DAY_MS:
                print(f"{dest} sent a non-standard time stamp {stamp:#x}", file=sys.stderr)
                return 1
            # Its midnight is the one that puts its clock within half a day of ours.
            theirs = (t0 // (DAY_MS * MS)) * DAY_MS * MS + stamp * MS
            theirs += round((t0 - theirs) / (DAY_MS * MS)) * DAY_MS * MS
            lo = t0 - theirs - MS + 1 if lo is None else max(lo, t0 - theirs - MS + 1)
            hi = t1 - theirs if hi is None else min(hi, t1 - theirs)
            got += 1
            break
        time.sleep(0.003)  # spreads the probes over the millisecond's phases
    if got == 0:
        print(f"no ICMP timestamp reply from {dest}", file=sys.stderr)
        return 1
    print(lo, hi, got)
    if lo > hi:
        print(f"the {got} replies' spans do not meet: a clock stepped or ran at another rate", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
