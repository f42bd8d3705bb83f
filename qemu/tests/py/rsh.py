#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A stand-in for ssh between the test VMs, which have no sshd: Open MPI's launcher
(PRRTE's `plm_ssh_agent`) starts its daemon on the other VM through it (qemu/tests/mpi.sh).

  rsh.py serve PORT       run each command received on PORT with bash, its output sent back
  rsh.py HOST CMD...      run CMD on HOST (whose `serve` listens on $RSH_PORT, default 2222)

Test VMs only: the server runs whatever a connection sends, as root.
"""
import os, socket, subprocess, sys, threading


def serve(port):
    s = socket.create_server(('', port), reuse_port=True)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=run, args=(conn,), daemon=True).start()


def run(conn):
    with conn, conn.makefile('rb') as f:
        cmd = f.readline().decode().rstrip('\n')
        subprocess.run(['bash', '-c', cmd], stdin=subprocess.DEVNULL, stdout=conn.fileno(),
                       stderr=subprocess.STDOUT, check=False)


def client(host, args):
    port = int(os.environ.get('RSH_PORT', '2222'))
    with socket.create_connection((host, port), timeout=30) as s:
        s.settimeout(None)
        s.sendall((' '.join(args) + '\n').encode())
        while True:
            b = s.recv(65536)
            if not b:
                return 0
            sys.stdout.buffer.write(b)
            sys.stdout.buffer.flush()


if __name__ == '__main__':
    if sys.argv[1] == 'serve':
        serve(int(sys.argv[2]))
    else:
        sys.exit(client(sys.argv[1], sys.argv[2:]))
