#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""RC data integrity across two hosts, with stock pyverbs.

The client fills a buffer with random bytes and moves it to the server by RDMA WRITE (in
chunks of every size class), SEND, and RDMA READ (the server's copy back into a fresh client
buffer), then WRITEs a range at one offset in a page into a range at another; both sides
compare SHA-256 digests exchanged over TCP. Meant to run under netem loss, duplication and
reordering (RC must deliver exactly once, in order, uncorrupted), and in one VM, where a
WRITE's payload goes from the client's pages straight into the server's.

  rc_integrity.py server DEV GID_INDEX PORT
  rc_integrity.py client DEV GID_INDEX PORT SERVER_IP
"""
import hashlib, json, os, socket, sys, time
import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR

SIZE = 4 << 20
# Bytes of the last WRITE, from and to different offsets in a page: several loopback segments.
SHIFTED = 3 * 65536 + 11
ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ


class Channel:
    """Line-delimited JSON over the TCP side channel."""

    def __init__(self, sock):
        self.sock = sock
        self.rfile = sock.makefile('rb')

    def send(self, obj):
        self.sock.sendall(json.dumps(obj).encode() + b'\n')

    def recv(self):
        line = self.rfile.readline()
        if not line:
            raise SystemExit('peer closed the side channel')
        return json.loads(line)

    def xchg(self, obj):
        self.send(obj)
        return self.recv()


def poll(cq, n=1, timeout=120):
    end = time.time() + timeout
    got = 0
    while got < n:
        k, wcs = cq.poll()
        for wc in wcs[:k]:
            if wc.status != e.IBV_WC_SUCCESS:
                raise SystemExit(f'completion error {wc.status} opcode {wc.opcode}')
        got += k
        if time.time() > end:
            raise SystemExit(f'timeout waiting for {n - got} completions')
    return got


def main():
    role, dev, gid_index, port = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ctx = d.Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 256)
    cap = QPCap(max_send_wr=64, max_recv_wr=64, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    mr = MR(pd, SIZE, ACCESS)
    gid = ctx.query_gid(1, gid_index)
    mine = {'qpn': qp.qp_num, 'psn': 0x123 if role == 'server' else 0x456, 'gid': str(gid),
            'rkey': mr.rkey, 'addr': mr.buf}
    if role == 'server':
        ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(('0.0.0.0', port)); ls.listen(1)
        sock, _ = ls.accept()
    else:
        sock = socket.socket()
        for _ in range(60):
            try:
                sock.connect((sys.argv[5], port)); break
            except OSError:
                time.sleep(1)
    ch = Channel(sock)
    peer = ch.xchg(mine)
    gr = GlobalRoute(dgid=GID(peer['gid']), sgid_index=gid_index)
    a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
    a.qp_access_flags = ACCESS
    a.path_mtu = e.IBV_MTU_1024
    a.dest_qp_num = peer['qpn']
    a.rq_psn = peer['psn']
    a.sq_psn = mine['psn']
    a.max_dest_rd_atomic = 4
    a.max_rd_atomic = 4
    a.min_rnr_timer = 12
    a.timeout = 14
    a.retry_cnt = 7
    a.rnr_retry = 7
    a.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
    qp.to_init(a)
    for _ in range(8):
        qp.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(mr.buf, SIZE, mr.lkey)]))
    qp.to_rts(a)
    ch.xchg('ready')
    if role == 'client':
        payload = os.urandom(SIZE)
        mr.write(payload, SIZE)
        digest = hashlib.sha256(payload).hexdigest()
        # WRITEs of growing sizes cover ONLY, FIRST/MIDDLE/LAST and odd lengths.
        off = 0
        for n in (1, 7, 1024, 1025, 4096, 65537, 1 << 20):
            n = min(n, SIZE - off)
            wr = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf + off, n, mr.lkey)])
            wr.set_wr_rdma(peer['rkey'], peer['addr'] + off)
            qp.post_send(wr); poll(cq)
            off += n
        while off < SIZE:
            n = min(1 << 20, SIZE - off)
            wr = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf + off, n, mr.lkey)])
            wr.set_wr_rdma(peer['rkey'], peer['addr'] + off)
            qp.post_send(wr); poll(cq)
            off += n
        assert ch.xchg({'write': digest}) == 'write-ok', 'server saw different bytes after WRITE'
        print(f'WRITE {SIZE} B ok', flush=True)
        # READ the server's copy back into a zeroed buffer.
        mr.write(bytes(SIZE), SIZE)
        wr = SendWR(wr_id=3, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(mr.buf, SIZE, mr.lkey)])
        wr.set_wr_rdma(peer['rkey'], peer['addr'])
        qp.post_send(wr); poll(cq)
        back = mr.read(SIZE, 0)
        assert hashlib.sha256(back).hexdigest() == digest, 'READ returned different bytes'
        print(f'READ {SIZE} B ok', flush=True)
        # SEND a fresh random message of 1 MiB + 3 bytes.
        msg = os.urandom((1 << 20) + 3)
        mr.write(msg, len(msg))
        qp.post_send(SendWR(wr_id=4, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, len(msg), mr.lkey)]))
        poll(cq)
        assert ch.xchg({'send': hashlib.sha256(msg).hexdigest(), 'len': len(msg)}) == 'send-ok'
        # A WRITE whose source and target start at different offsets in their pages, so that
        # the pieces of one page on either side cross the other side's page boundaries.
        src, dst, n = 5, SIZE - SHIFTED - 4093, SHIFTED
        wr = SendWR(wr_id=5, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf + src, n, mr.lkey)])
        wr.set_wr_rdma(peer['rkey'], peer['addr'] + dst)
        qp.post_send(wr); poll(cq)
        want = hashlib.sha256(mr.read(n, src)).hexdigest()
        assert ch.xchg({'shifted': want, 'off': dst, 'len': n}) == 'shifted-ok', \
            'server saw different bytes after a WRITE between page offsets'
        print(f'integrity ok: WRITE {SIZE} B, READ {SIZE} B, SEND {len(msg)} B, WRITE {n} B shifted')
    else:
        req = ch.recv()
        got = hashlib.sha256(mr.read(SIZE, 0)).hexdigest()
        ch.send('write-ok' if got == req['write'] else 'write-bad')
        poll(cq)  # the SEND
        req = ch.recv()
        got = hashlib.sha256(mr.read(req['len'], 0)).hexdigest()
        ch.send('send-ok' if got == req['send'] else 'send-bad')
        assert got == req['send'], 'SEND delivered different bytes'
        req = ch.recv()
        got = hashlib.sha256(mr.read(req['len'], req['off'])).hexdigest()
        ch.send('shifted-ok' if got == req['shifted'] else 'shifted-bad')
        assert got == req['shifted'], 'a WRITE between page offsets delivered different bytes'
        print('server: contents verified')


if __name__ == '__main__':
    main()
