#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Send queue completions in posting order (IBA 10.8.3.1), with stock pyverbs, over a slow link.

A send queue returns its completions in the order its work requests were posted, local
operations (BIND_MW) included, whatever order the HCA executes them in. Over a link with a
round trip of tens of ms (netem delay, set by qemu/tests/sq-order.sh) a bind posted behind an
RDMA WRITE runs while the WRITE still waits for its ACK: that is the window in which a
requester that completes local operations at once would let the bind's completion overtake the
WRITE's.

The client runs two cases, each on its own RC QP connected to a QP of the server:

- order: RDMA WRITE of WRITE_LEN bytes, BIND_MW of a type 2 window (ibv_post_send with
  IBV_WR_BIND_MW), SEND. The CQ must show WRITE, BIND_MW, SEND in that order, all successful.
- bind-error: RDMA WRITE of WRITE_LEN bytes, BIND_MW of a type 2 window of another PD (IBA
  10.6.7.2.4: a window is bound only by a QP of its own PD; IBV_WC_MW_BIND_ERR), SEND. The
  WRITE must complete with IBV_WC_SUCCESS (it was executed and acknowledged: IBA 10.8.3.1 asks
  for its real status, not a flush), then the bind with IBV_WC_MW_BIND_ERR, then the SEND with
  IBV_WC_WR_FLUSH_ERR, and the QP must be in the error state.
- flush-bound: on a QP connected to a QPN that does not exist on the server (its packets are
  dropped there, so its WRITE is never acknowledged), RDMA WRITE, BIND_MW of a type 2 window,
  SEND; once the bind has run, the client moves the QP to the error state. The WRITE and the SEND
  must complete with IBV_WC_WR_FLUSH_ERR, and the bind, which took effect (the window is bound),
  with IBV_WC_SUCCESS and opcode IBV_WC_BIND_MW: a flush reports the status an operation had, so
  that a consumer does not take a bound window for an unbound one.

  sq_order.py server DEV GID_INDEX PORT
  sq_order.py client DEV GID_INDEX PORT SERVER_IP
"""
import json, socket, sys, time
import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.mr import MR, MW, MWBindInfo
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR

WRITE_LEN = 256 << 10
SEND_LEN = 64
CASES = ('order', 'bind-error')
LW, RW = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE
RR = e.IBV_ACCESS_REMOTE_READ
BIND = e.IBV_ACCESS_MW_BIND

WC_NAMES = {getattr(e, n): n for n in dir(e) if n.startswith('IBV_WC_') and n.endswith('_ERR')}
WC_NAMES[e.IBV_WC_SUCCESS] = 'IBV_WC_SUCCESS'
OP_NAMES = {e.IBV_WC_RDMA_WRITE: 'RDMA_WRITE', e.IBV_WC_BIND_MW: 'BIND_MW', e.IBV_WC_SEND: 'SEND'}


def make_qp(ctx, pd, cq):
    cap = QPCap(max_send_wr=16, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    return QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap, sq_sig_all=1))


def connect(qp, mine, peer, gid_index):
    a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
    a.qp_access_flags = LW | RW | RR
    a.path_mtu = e.IBV_MTU_1024
    a.dest_qp_num = peer['qpn']
    a.rq_psn = peer['psn']
    a.sq_psn = mine['psn']
    a.max_dest_rd_atomic = 1
    a.max_rd_atomic = 1
    a.min_rnr_timer = 12
    a.timeout = 18   # 4.096 us * 2^18 = 1.07 s: no retransmission over the delayed link
    a.retry_cnt = 7
    a.rnr_retry = 7
    a.ah_attr = AHAttr(gr=GlobalRoute(dgid=GID(peer['gid']), sgid_index=gid_index), is_global=1, port_num=1)
    qp.to_init(a)
    qp.to_rts(a)


def poll(cq, n, seconds=60):
    wcs, end = [], time.time() + seconds
    while len(wcs) < n and time.time() < end:
        k, got = cq.poll(num_entries=n - len(wcs))
        wcs += got[:k]
        if not k:
            time.sleep(0.001)
    return wcs


def describe(wcs):
    return ', '.join(f'wr_id {w.wr_id} {OP_NAMES.get(w.opcode, w.opcode) if w.status == e.IBV_WC_SUCCESS else "-"} '
                     f'{WC_NAMES.get(w.status, w.status)}' for w in wcs)


def main():
    role, dev, gid_index, port = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ctx = d.Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 64)
    gid = str(ctx.query_gid(1, gid_index))
    qps = {c: make_qp(ctx, pd, cq) for c in CASES}
    mr = MR(pd, WRITE_LEN + SEND_LEN, LW | RW | RR | BIND)
    mine = {c: {'qpn': qps[c].qp_num, 'psn': 0x100 + i, 'gid': gid} for i, c in enumerate(CASES)}
    mine['rkey'], mine['addr'] = mr.rkey, mr.buf
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
    for c in CASES:
        connect(qps[c], mine[c], peer[c], gid_index)
    if role == 'server':
        for c in CASES:
            qps[c].post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(mr.buf + WRITE_LEN, SEND_LEN, mr.lkey)]))
        sock.sendall(b'"ready"\n')
        # Stay connected until the client is done (its side channel closes).
        rfile.readline()
        print('server: client finished')
        return
    rfile.readline()  # the server's receives are posted

    pd_other = PD(ctx)
    mw = MW(pd, e.IBV_MW_TYPE_2)
    mw_other = MW(pd_other, e.IBV_MW_TYPE_2)
    ok = True

    def run(case, window, write_len=WRITE_LEN):
        """Posts WRITE (wr_id 1), BIND_MW of `window` (2), SEND (3) on the case's QP; returns
        the three completions in CQ order and the time from posting to the last."""
        qp = qps[case] if case in qps else flush_qp
        write = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf, write_len, mr.lkey)])
        write.set_wr_rdma(peer['rkey'], peer['addr'])
        bind = SendWR(wr_id=2, opcode=e.IBV_WR_BIND_MW)
        bind.set_bind_wr(window, MWBindInfo(mr, mr.buf, 4096, RW | RR))
        send = SendWR(wr_id=3, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf + WRITE_LEN, SEND_LEN, mr.lkey)])
        # One list: one doorbell, so the bind is fetched while the WRITE is unacknowledged.
        write.next_wr = bind
        bind.next_wr = send
        start = time.time()
        qp.post_send(write)
        if case == 'flush-bound':
            # The bind runs as soon as the WRITE's packets are out; the WRITE waits for an ACK
            # that never comes (its first retry is a second away).
            time.sleep(0.3)
            qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
        wcs = poll(cq, 3)
        took = time.time() - start
        print(f'{case}: {describe(wcs)} ({took * 1000:.0f} ms)')
        return wcs, took

    # Case 1: all succeed, completions in posting order.
    wcs, _ = run('order', mw)
    got = [(w.wr_id, w.status) for w in wcs]
    want = [(1, e.IBV_WC_SUCCESS), (2, e.IBV_WC_SUCCESS), (3, e.IBV_WC_SUCCESS)]
    if got != want:
        print(f'FAIL order: completions {describe(wcs)}; expected WRITE, BIND_MW, SEND, each IBV_WC_SUCCESS')
        ok = False
    elif [w.opcode for w in wcs] != [e.IBV_WC_RDMA_WRITE, e.IBV_WC_BIND_MW, e.IBV_WC_SEND]:
        print(f'FAIL order: opcodes {[w.opcode for w in wcs]}')
        ok = False
    else:
        print('PASS order: WRITE, BIND_MW, SEND completed in posting order')

    # Case 2: a bind that fails behind an unacknowledged WRITE.
    wcs, _ = run('bind-error', mw_other)
    got = [(w.wr_id, w.status) for w in wcs]
    want = [(1, e.IBV_WC_SUCCESS), (2, e.IBV_WC_MW_BIND_ERR), (3, e.IBV_WC_WR_FLUSH_ERR)]
    if got != want:
        print(f'FAIL bind-error: completions {describe(wcs)}; expected WRITE IBV_WC_SUCCESS, '
              'BIND_MW IBV_WC_MW_BIND_ERR, SEND IBV_WC_WR_FLUSH_ERR')
        ok = False
    else:
        print('PASS bind-error: WRITE succeeded, then the bind failed, then the SEND flushed')
    attr, _ = qps['bind-error'].query(e.IBV_QP_STATE)
    if attr.qp_state != e.IBV_QPS_ERR:
        print(f'FAIL bind-error: QP state {attr.qp_state}, expected IBV_QPS_ERR')
        ok = False

    # Case 3: the QP goes to error behind a bind that took effect.
    flush_qp = make_qp(ctx, pd, cq)
    connect(flush_qp, {'psn': 0x200}, {'qpn': 0xFFFFF0, 'psn': 0x300, 'gid': peer['bind-error']['gid']},
            gid_index)
    mw_flush = MW(pd, e.IBV_MW_TYPE_2)
    # A WRITE of a few packets: all of them are out at once (a longer one would wait for ACKs
    # in the PSN window, and the bind behind it would never run).
    wcs, _ = run('flush-bound', mw_flush, 4096)
    got = [(w.wr_id, w.status) for w in wcs]
    want = [(1, e.IBV_WC_WR_FLUSH_ERR), (2, e.IBV_WC_SUCCESS), (3, e.IBV_WC_WR_FLUSH_ERR)]
    if got != want or wcs[1].opcode != e.IBV_WC_BIND_MW:
        print(f'FAIL flush-bound: completions {describe(wcs)}; expected WRITE IBV_WC_WR_FLUSH_ERR, '
              'BIND_MW IBV_WC_SUCCESS, SEND IBV_WC_WR_FLUSH_ERR')
        ok = False
    else:
        print('PASS flush-bound: the bound window completed IBV_WC_SUCCESS between two flushes')
    extra = poll(cq, 1, 0.5)
    if extra:
        print(f'FAIL: unexpected further completions: {describe(extra)}')
        ok = False

    sock.sendall(b'"done"\n')
    # Windows before the QP they are bound to (type 2B), the QPs before the PDs.
    mw.close()
    mw_other.close()
    mw_flush.close()
    flush_qp.close()
    for q in qps.values():
        q.close()
    if not ok:
        sys.exit(1)
    print('sq-order ok')


if __name__ == '__main__':
    main()
