#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A plain TCP sink, for rsocket's preload library (qemu/tests/rsocket.sh): listens on ADDR:PORT,
accepts one connection, reads it to its end and prints the byte count and SHA-256 of what came.
Only ordinary socket calls (socket, setsockopt SO_REUSEADDR, bind, listen, accept, recv, close),
which librspreload.so maps to rsockets."""
import hashlib
import socket
import sys

addr, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(1)
c, peer = s.accept()
h, n = hashlib.sha256(), 0
while True:
    b = c.recv(1 << 16)
    if not b:
        break
    h.update(b)
    n += len(b)
c.close()
s.close()
print(n, h.hexdigest())
