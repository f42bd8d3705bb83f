#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""RC requester behaviour when the path dies in the middle of a transfer, with stock pyverbs.

The client keeps DEPTH RDMA WRITEs of 64 KiB in flight to the server. Once it has completed
STREAM of them it creates MARK (a file the server's test script waits for), and the server's
script takes its link down. The client must then see, within the retry budget, exactly one
IBV_WC_RETRY_EXC_ERR (the oldest outstanding WRITE, after retry_cnt retransmissions each after
the local ACK timeout) and every other outstanding WR completed with IBV_WC_WR_FLUSH_ERR, and
its QP in the error state: no hang, nothing lost, nothing completed twice.

  linkdown.py server DEV GID_INDEX PORT
  linkdown.py client DEV GID_INDEX PORT SERVER_IP MARK
"""
import json, os, socket, sys, time
import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

MSG = 64 << 10
DEPTH = 16
STREAM = 200
TIMEOUT = 14      # local ACK timeout exponent: 4.096 us * 2^14 = 67 ms
RETRY_CNT = 7
ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE


def main():
    role, dev, gid_index, port = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ctx = d.Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 2 * DEPTH)
    cap = QPCap(max_send_wr=DEPTH, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    mr = MR(pd, MSG * DEPTH, ACCESS)
    gid = ctx.query_gid(1, gid_index)
    mine = {'qpn': qp.qp_num, 'psn': 0x77, 'gid': str(gid), 'rkey': mr.rkey, 'addr': mr.buf}
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
    rfile = sock.makefile('rb')
    sock.sendall(json.dumps(mine).encode() + b'\n')
    peer = json.loads(rfile.readline())
    a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
    a.qp_access_flags = ACCESS
    a.path_mtu = e.IBV_MTU_1024
    a.dest_qp_num = peer['qpn']
    a.rq_psn = peer['psn']
    a.sq_psn = mine['psn']
    a.max_dest_rd_atomic = 1
    a.max_rd_atomic = 1
    a.min_rnr_timer = 12
    a.timeout = TIMEOUT
    a.retry_cnt = RETRY_CNT
    a.rnr_retry = 7
    a.ah_attr = AHAttr(gr=GlobalRoute(dgid=GID(peer['gid']), sgid_index=gid_index), is_global=1, port_num=1)
    qp.to_init(a)
    qp.to_rts(a)
    if role == 'server':
        # Stay connected until the client is done (its side channel closes).
        rfile.readline()
        print('server: client finished')
        return

    def post(slot):
        wr = SendWR(wr_id=slot, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(mr.buf + slot * MSG, MSG, mr.lkey)])
        wr.set_wr_rdma(peer['rkey'], peer['addr'] + slot * MSG)
        qp.post_send(wr)

    for s in range(DEPTH):
        post(s)
    outstanding = DEPTH
    done = 0
    marked = False
    last_ok = time.time()
    statuses = []
    start = time.time()
    # A hang would stop this loop: bound it well past the retry budget.
    while outstanding:
        if time.time() - last_ok > 60:
            raise SystemExit(f'hang: {outstanding} WRs outstanding 60 s after the last completion')
        n, wcs = cq.poll(num_entries=DEPTH)
        for wc in wcs[:n]:
            outstanding -= 1
            if wc.status == e.IBV_WC_SUCCESS and not statuses:
                done += 1
                last_ok = time.time()
                if done >= STREAM and not marked:
                    open(sys.argv[6], 'w').close()
                    marked = True
                    print(f'client: {done} WRITEs completed in {time.time() - start:.1f} s, marked')
                post(wc.wr_id)
                outstanding += 1
            else:
                statuses.append((wc.status, wc.wr_id, time.time() - last_ok))
    print(f'client: {done} WRITEs completed before the error')
    for st, wr, t in statuses:
        print(f'  wr_id {wr}: status {st} at +{t:.2f} s')
    first = statuses[0]
    per_try = max(4.096e-6 * (1 << TIMEOUT), 0.5)  # roxe waits at least 500 ms per try
    budget = (RETRY_CNT + 1) * per_try
    ok = True
    if first[0] != e.IBV_WC_RETRY_EXC_ERR:
        print(f'FAIL: first error is status {first[0]}, expected IBV_WC_RETRY_EXC_ERR ({e.IBV_WC_RETRY_EXC_ERR})'); ok = False
    if first[2] > budget + 3.0:
        print(f'FAIL: RETRY_EXC_ERR after {first[2]:.2f} s, budget {budget:.2f} s (+3 s slack)'); ok = False
    if first[2] < RETRY_CNT * 4.096e-6 * (1 << TIMEOUT):
        print(f'FAIL: RETRY_EXC_ERR after {first[2]:.2f} s: sooner than {RETRY_CNT} timeouts'); ok = False
    rest = statuses[1:]
    if len(rest) != DEPTH - 1 or any(s != e.IBV_WC_WR_FLUSH_ERR for s, _, _ in rest):
        print(f'FAIL: expected {DEPTH - 1} IBV_WC_WR_FLUSH_ERR after it, got {[s for s, _, _ in rest]}'); ok = False
    ids = sorted(w for _, w, _ in statuses)
    if ids != list(range(DEPTH)):
        print(f'FAIL: error completions cover wr_ids {ids}, expected each of 0..{DEPTH - 1} once'); ok = False
    attr, _ = qp.query(e.IBV_QP_STATE)
    if attr.qp_state != e.IBV_QPS_ERR:
        print(f'FAIL: QP state {attr.qp_state}, expected IBV_QPS_ERR'); ok = False
    print(f'client: RETRY_EXC_ERR {first[2]:.2f} s after the last success (budget {budget:.2f} s), '
          f'{len(rest)} flushed, QP state {attr.qp_state}')
    sock.sendall(b'"done"\n')
    if not ok:
        sys.exit(1)
    print('linkdown ok')


if __name__ == '__main__':
    main()
