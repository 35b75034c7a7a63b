#!/usr/bin/env python3
"""A user-space IPv4 peer on the address-free tap, the way rocemu must be one.

Opens an AF_PACKET socket on the tap, resolves the guest's MAC with its own
ARP requests, answers the guest's ARP for the peer address, and pings the
guest with hand-built ICMP echo requests until it has the requested number of
replies. The host kernel takes no part: the tap
has no address. Prints "<n> echo replies from <guest>" and exits 0 on
success, 1 on timeout.

usage: raw_peer.py IFACE [REPLIES] [SECONDS]     (defaults 3 and 30)
"""
import select
import socket
import struct
import sys
import time

PEER_MAC = bytes.fromhex("020000770001")  # locally administered
PEER_IP = socket.inet_aton("10.77.0.1")
GUEST_IP = socket.inet_aton("10.77.0.2")
ETH_P_ALL, ETH_P_ARP, ETH_P_IP = 0x0003, 0x0806, 0x0800
ICMP_ID = 0x7777


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def arp_reply(req):
    sender_mac, sender_ip = req[22:28], req[28:32]
    arp = struct.pack("!HHBBH6s4s6s4s", 1, ETH_P_IP, 6, 4, 2,
                      PEER_MAC, PEER_IP, sender_mac, sender_ip)
    return sender_mac + PEER_MAC + struct.pack("!H", ETH_P_ARP) + arp


def arp_request():
    arp = struct.pack("!HHBBH6s4s6s4s", 1, ETH_P_IP, 6, 4, 1,
                      PEER_MAC, PEER_IP, b"\0" * 6, GUEST_IP)
    return b"\xff" * 6 + PEER_MAC + struct.pack("!H", ETH_P_ARP) + arp


def echo_request(guest_mac, seq):
    icmp = struct.pack("!BBHHH", 8, 0, 0, ICMP_ID, seq) + b"rocemu-raw-peer!"
    icmp = icmp[:2] + struct.pack("!H", checksum(icmp)) + icmp[4:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), seq, 0, 64, 1, 0,
                     PEER_IP, GUEST_IP)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return guest_mac + PEER_MAC + struct.pack("!H", ETH_P_IP) + ip + icmp


def main():
    iface = sys.argv[1]
    want = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    deadline = time.monotonic() + (float(sys.argv[3]) if len(sys.argv) > 3 else 30)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((iface, 0))
    guest_mac = None
    replies, seq, next_ping = set(), 0, 0.0
    while len(replies) < want and time.monotonic() < deadline:
        now = time.monotonic()
        if now >= next_ping:
            if guest_mac:
                seq += 1
                sock.send(echo_request(guest_mac, seq))
            else:
                sock.send(arp_request())
            next_ping = now + 0.2
        ready, _, _ = select.select([sock], [], [], 0.1)
        if not ready:
            continue
        frame = sock.recv(65535)
        if frame[6:12] == PEER_MAC or len(frame) < 42:
            continue
        ethertype = struct.unpack("!H", frame[12:14])[0]
        if ethertype == ETH_P_ARP:
            op = struct.unpack("!H", frame[20:22])[0]
            if op == 1 and frame[38:42] == PEER_IP:
                sock.send(arp_reply(frame))
            if frame[28:32] == GUEST_IP:
                guest_mac = guest_mac or frame[22:28]
        elif ethertype == ETH_P_IP and frame[23] == 1 and frame[26:30] == GUEST_IP:
            ihl = (frame[14] & 0x0F) * 4
            icmp = frame[14 + ihl:]
            if icmp[0] == 0 and struct.unpack("!H", icmp[4:6])[0] == ICMP_ID:
                replies.add(struct.unpack("!H", icmp[6:8])[0])
            guest_mac = guest_mac or frame[6:12]
    print(f"{len(replies)} echo replies from {socket.inet_ntoa(GUEST_IP)}")
    return 0 if len(replies) >= want else 1


if __name__ == "__main__":
    sys.exit(main())
