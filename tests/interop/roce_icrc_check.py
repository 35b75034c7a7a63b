#!/usr/bin/env python3
"""Checks the ICRC of every RoCEv2 (IPv4, UDP 4791) frame in a classic pcap.

The ICRC is computed independently of rocemu and of rxe, from the IBTA rule
as tests/interop/README.md states it: CRC-32 over 8 bytes of 0xFF (the masked
LRH), then the IPv4 header with TOS, TTL and checksum set to all ones, the UDP
header with its checksum set to all ones, the BTH with byte 4 set to all ones,
the rest of the transport headers and the payload; stored little-endian.

usage: roce_icrc_check.py FILE.pcap
prints "<frames> RoCEv2 frames, <good> with a valid ICRC"; exit 0 only if
there was at least one frame and all were valid.
"""
import struct
import sys
import zlib

ETH_LEN, UDP_LEN, BTH_LEN, ICRC_LEN = 14, 8, 12, 4
ROCEV2_PORT = 4791


def frames(data):
    if struct.unpack("<I", data[:4])[0] != 0xA1B2C3D4:
        raise SystemExit("roce_icrc_check: not a little-endian microsecond pcap")
    off = 24
    while off + 16 <= len(data):
        incl = struct.unpack("<I", data[off + 8:off + 12])[0]
        off += 16
        yield data[off:off + incl]
        off += incl


def icrc_ok(frame):
    """None if the frame is not RoCEv2 over IPv4, else whether its ICRC holds."""
    if len(frame) < ETH_LEN + 20 or frame[12:14] != b"\x08\x00":
        return None
    ihl = (frame[ETH_LEN] & 0x0F) * 4
    ip = bytearray(frame[ETH_LEN:ETH_LEN + ihl])
    if ip[9] != 17:
        return None
    udp = bytearray(frame[ETH_LEN + ihl:ETH_LEN + ihl + UDP_LEN])
    if struct.unpack(">H", udp[2:4])[0] != ROCEV2_PORT:
        return None
    ip_total = struct.unpack(">H", ip[2:4])[0]
    ib = bytearray(frame[ETH_LEN + ihl + UDP_LEN:ETH_LEN + ip_total])
    if len(ib) < BTH_LEN + ICRC_LEN:
        return False
    ip[1] = 0xFF
    ip[8] = 0xFF
    ip[10:12] = b"\xff\xff"
    udp[6:8] = b"\xff\xff"
    ib[4] = 0xFF
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(ib[:-ICRC_LEN]))
    return struct.pack("<I", crc) == bytes(frame[ETH_LEN + ip_total - ICRC_LEN:ETH_LEN + ip_total])


def main():
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    results = [r for r in (icrc_ok(fr) for fr in frames(data)) if r is not None]
    good = sum(results)
    print(f"{len(results)} RoCEv2 frames, {good} with a valid ICRC")
    return 0 if results and good == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
