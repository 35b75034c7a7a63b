#!/usr/bin/env python3
"""Writes every frame of the given pcap files as one file in a corpus folder."""
import os
import struct
import sys


def frames(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    off = 24
    while off + 16 <= len(data):
        _, _, caplen, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        yield data[off:off + caplen]
        off += caplen


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    n = 0
    for path in sys.argv[2:]:
        for i, fr in enumerate(frames(path)):
            with open(os.path.join(out, f"{os.path.basename(path)}.{i}"), "wb") as f:
                f.write(fr)
            n += 1
    print(f"{n} frames into {out}")


if __name__ == "__main__":
    main()
