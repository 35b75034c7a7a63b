#!/usr/bin/env python3
"""Server half of the rdma_ops out-of-band exchange, with no RDMA behind it.

Used by selftest.sh so that the guest's rxe sends RoCEv2 requests onto the
tap: it hands the rdma_ops client a made-up record (QPN 0x000011, PSN 0,
GID ::ffff:10.77.0.1, rkey 0x1234, vaddr 0x10000, 1 MiB + 16 bytes), answers the
client's DONE/FAIL with FAIL and exits. Prints the client's record.

usage: oob_stub.py [PORT]      (default 18515; gives up after 120 s)
"""
import socket
import sys

RECORD_LEN = 87
STUB_RECORD = (b"0000:000011:000000:00000000000000000000ffff0a4d0001:"
               b"00001234:0000000000010000:00100010\0")
assert len(STUB_RECORD) == RECORD_LEN


def read_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 18515
    with socket.socket() as ls:
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("0.0.0.0", port))
        ls.listen(1)
        ls.settimeout(120)
        conn, _ = ls.accept()
        with conn:
            conn.settimeout(120)
            record = read_exact(conn, RECORD_LEN)
            if len(record) != RECORD_LEN:
                print("oob_stub: short client record", file=sys.stderr)
                return 1
            print("client record:", record[:-1].decode(), flush=True)
            conn.sendall(STUB_RECORD)
            verdict = read_exact(conn, 5)
            print("client verdict:", verdict[:4].decode(errors="replace"), flush=True)
            conn.sendall(b"FAIL\0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
