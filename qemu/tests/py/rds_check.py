#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Reliable Datagram Sockets over the RDMA device: messages of 1 B to 64 KiB, end to end.

  rds_check.py serve SELF_IP PORT COUNT    echo COUNT messages back to their sender
  rds_check.py send SELF_IP PEER_IP PORT [ROUNDS [WINDOW]]
                                           send every size ROUNDS times (4), WINDOW messages in
                                           flight (1), check each echo's bytes

Both sockets force the InfiniBand transport (`SO_RDS_TRANSPORT` = `RDS_TRANS_IB`, which
rds_rdma provides over any RDMA device, RoCE included) before binding, and the sender checks
that the option reads back as IB: RDS does not fall back to TCP for such a socket. A message
is a 12-byte header (sequence number, length, CRC32 of the payload) and a payload derived from
the sequence number; the sender checks that each echo is the message it sent, in order.
"""
import socket, struct, sys, time, zlib

SOL_RDS = 276
SO_RDS_TRANSPORT = 8
RDS_TRANS_IB = 0
SIZES = [1, 2, 7, 64, 512, 1024, 4095, 4096, 4097, 16384, 32768, 65535, 65536]
HDR = struct.Struct('!IiI')


def rds_socket(addr, port):
    s = socket.socket(socket.AF_RDS, socket.SOCK_SEQPACKET, 0)
    s.setsockopt(SOL_RDS, SO_RDS_TRANSPORT, RDS_TRANS_IB)
    # Room for a few 64 KiB messages in flight.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((addr, port))
    return s


def payload(seq, size):
    pattern = struct.pack('!I', seq * 2654435761 & 0xffffffff) * (size // 4 + 1)
    return pattern[:size]


def message(seq, size):
    body = payload(seq, size)
    return HDR.pack(seq, size, zlib.crc32(body)) + body


def serve(addr, port, count):
    s = rds_socket(addr, port)
    for _ in range(count):
        data, peer = s.recvfrom(1 << 20)
        s.sendto(data, peer)
    print(f'echoed {count} messages')


def send(addr, peer, port, rounds=4, window=1):
    s = rds_socket(addr, port)
    transport = s.getsockopt(SOL_RDS, SO_RDS_TRANSPORT)
    assert transport == RDS_TRANS_IB, f'transport {transport}, want IB ({RDS_TRANS_IB})'
    s.settimeout(60)
    sizes = [size for size in SIZES for _ in range(rounds)]
    moved = 0
    t0 = time.monotonic()
    # WINDOW messages go out, then their echoes are checked in order: RDS delivers the messages
    # of one socket to another in the order sent.
    for first in range(0, len(sizes), window):
        sent = []
        for seq in range(first, min(first + window, len(sizes))):
            out = message(seq, max(sizes[seq] - HDR.size, 0))
            s.sendto(out, (peer, port))
            sent.append(out)
        for i, out in enumerate(sent):
            back, who = s.recvfrom(1 << 20)
            assert who[0] == peer, f'echo from {who}'
            assert back == out, f'message {first + i} ({len(out)} B) came back as {len(back)} B, different'
            moved += len(out)
    print(f'{len(sizes)} messages of {min(SIZES)} to {max(SIZES)} B echoed intact over RDS/IB, '
          f'{window} in flight ({moved} B each way, {time.monotonic() - t0:.1f} s)')


if __name__ == '__main__':
    cmd = sys.argv[1]
    if cmd == 'serve':
        serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        send(sys.argv[2], sys.argv[3], int(sys.argv[4]), *(int(a) for a in sys.argv[5:7]))
