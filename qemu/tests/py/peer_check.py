#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Forged RoCEv2 packets from a third address must not reach a connected QP.

  peer_check.py DEV GID_INDEX NETNS TARGET_IP FORGER_IP [GID6_INDEX TARGET_IP6]

DEV sits on a veth whose address is TARGET_IP; the veth's peer is in network namespace NETNS
(/run/netns/NETNS), which holds FORGER_IP. The RC/UC QP pairs are connected in loopback through
DEV's own GID (TARGET_IP), so the only legitimate IP source and destination of their packets is
TARGET_IP. Packets are built here (BTH, RETH/AETH, payload, ICRC) and sent by ordinary UDP
sockets created inside NETNS to TARGET_IP:4791, so they arrive on DEV's netdev from outside:

- control-*: from TARGET_IP itself (a transparent socket in NETNS). roxe must act on them: a
  SEND completes a receive with the forged bytes, a WRITE changes the MR, an ACK completes an
  outstanding SEND, a NAK fails it. This proves the headers and the ICRC are right, so that the
  forged-* cases below cannot pass because the packets were dropped for a bad ICRC.
- forged-*: the same packets from FORGER_IP. A QP must drop them (IBA: the source of an RC/UC
  packet must be the QP's peer; rdma_rxe's check_addr): nothing completes, the MR keeps its
  bytes, an outstanding SEND neither fails nor completes early and later completes normally,
  both QPs stay in RTS, real traffic afterwards works, and the device's `rcvd_peer_mismatch`
  hardware counter goes up by the number of forged packets (a missing counter fails).
- own-source-v6-send (with GID6_INDEX and TARGET_IP6, an IPv6 address of DEV's veth): a QP
  pair connected in loopback through that IPv6 GID gets a SEND sent from NETNS with TARGET_IP6,
  the device's own GID, as its source (a transparent IPv6 socket). IPv4 drops such a packet as a
  martian source before the UDP tunnel sees it (unless accept_local is set, as here for the
  controls); IPv6 has no such check, so the device must: nothing completes, real traffic works
  afterwards, `rcvd_peer_mismatch` goes up by one and `rcvd_icrc_err` does not (the packet was
  well formed).
- mcast-8192-groups (the per-packet cost limit, Documentation/security.md): packets to QPN
  0xFFFFFF sent from NETNS with a unicast destination (the device's own address) and with a
  multicast one that IP accepts but no QP is attached to, timed per packet with no group and
  with one UD QP attached to 8192 groups (the device's max_mcast_grp): each must cost what it
  cost with none, within MCAST_COST_RATIO (medians of rounds; with the groups attached, measured
  a second time if the first is over, and the faster of the two kept), so the table is not
  scanned.
  Each round's packets must all arrive (`rcvd_pkts`) before its time is taken. With no group
  attached, every one of them is a drop the device counts (`rcvd_drops`).

One PASS/FAIL line per case.
"""
import ctypes, os, socket, statistics, struct, sys, time
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.wr import RecvWR, SGE, SendWR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import (REMOTE_ALL, Counters, Env, Report, Sender, aeth, bth, drain, icrc_known_answers, poll,
                     qp_state, reth, wcname)

# BTH opcodes (IBA 9.2, drivers/infiniband/sw/roxe/proto/opcode.rs).
RC_SEND_ONLY, RC_WRITE_ONLY, RC_ACK, UC_SEND_ONLY = 0x04, 0x0a, 0x11, 0x24
# AETH syndromes: ACK with no credit information, NAK remote access error.
SYN_ACK, SYN_NAK_REM_ACCESS = 0x1f, 0x60 | 2
SIZE = 4096
PAYLOAD = bytes((0xf0 ^ i) & 0xff for i in range(64))
# R's min_rnr_timer for the RNR cases: 27 = 122.88 ms between the requester's RNR retries.
RNR_TIMER = 27
QUIET = 1.0   # how long "nothing happens" is watched


# ---- verbs ------------------------------------------------------------------------------------

class Pair:
    """Requester Q and responder R, connected in loopback: Q's SQ starts at PSN `psn` (R's
    expected PSN), R's at `psn ^ 0x800000`. R has an MR with every remote right, holding a
    pattern; Q has a source buffer. With `r_ready` False, R stays in INIT until `r_up()`."""

    def __init__(self, env, qp_type=e.IBV_QPT_RC, psn=0x123456, rnr_timer=1, timeout=14, r_ready=True):
        self.env, self.qp_type, self.psn = env, qp_type, psn & 0xffffff
        self.qcq, self.rcq = CQ(env.ctx, 16), CQ(env.ctx, 16)
        cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
        self.q = QP(env.pd, QPInitAttr(qp_type=qp_type, scq=self.qcq, rcq=self.qcq, cap=cap))
        self.r = QP(env.pd, QPInitAttr(qp_type=qp_type, scq=self.rcq, rcq=self.rcq, cap=cap))
        acc = REMOTE_ALL if qp_type == e.IBV_QPT_RC else (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
        self.rmr = MR(env.pd, SIZE, acc)
        self.qmr = MR(env.pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE)
        self.pattern = bytes((i * 7 + 3) & 0xff for i in range(SIZE))
        self.rmr.write(self.pattern, SIZE)
        self.attrs = {}
        for qp, peer, sq_psn, rq_psn in ((self.q, self.r, self.psn, self.psn ^ 0x800000),
                                         (self.r, self.q, self.psn ^ 0x800000, self.psn)):
            attr = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
            attr.qp_access_flags = acc
            attr.path_mtu = e.IBV_MTU_1024
            attr.dest_qp_num = peer.qp_num
            attr.rq_psn = rq_psn
            attr.sq_psn = sq_psn
            attr.max_dest_rd_atomic = 4
            attr.max_rd_atomic = 4
            attr.min_rnr_timer = rnr_timer
            attr.timeout = timeout
            attr.retry_cnt = 7
            attr.rnr_retry = 7
            attr.ah_attr = AHAttr(gr=GlobalRoute(dgid=env.gid, sgid_index=env.gid_index), is_global=1,
                                  port_num=1)
            self.attrs[qp.qp_num] = attr
            if qp is self.r and not r_ready:
                qp.to_init(attr)
            else:
                qp.to_rts(attr)

    def r_up(self):
        self.r.to_rts(self.attrs[self.r.qp_num])

    def post_recv(self, wr_id=0x77, offset=0, length=SIZE):
        self.r.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(self.rmr.buf + offset, length, self.rmr.lkey)]))

    def post_send(self, data, wr_id=0x55, opcode=e.IBV_WR_SEND, raddr=None):
        self.qmr.write(data, len(data))
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[SGE(self.qmr.buf, len(data), self.qmr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        if raddr is not None:
            wr.set_wr_rdma(self.rmr.rkey, raddr)
        self.q.post_send(wr)

    def rdata(self, n, offset=0):
        return self.rmr.read(n, offset)

    def states(self):
        """'' when both QPs are in RTS, else what they are in."""
        q, r = qp_state(self.q), qp_state(self.r)
        return '' if q == r == e.IBV_QPS_RTS else f'Q state {q}, R state {r} (RTS is {e.IBV_QPS_RTS})'


def wcs(lst):
    return '[' + ', '.join(f'{w.wr_id:#x}:{wcname(w.status)}/{w.byte_len}' for w in lst) + ']'


# ---- the test ---------------------------------------------------------------------------------

class Test:
    def __init__(self, dev, gid_index, netns, target, forger, gid6=None, target6=None):
        self.env = Env(dev, gid_index)
        self.env6 = Env(dev, gid6) if gid6 is not None else None
        self.own6 = None
        if target6:
            self.own6 = Sender(netns, target6, target6, 0xc100 + (os.getpid() & 0xfff), transparent=True)
        self.ctr = Counters(dev)
        self.legit = Sender(netns, target, target, 0xc000 + (os.getpid() & 0xfff), transparent=True)
        self.forger = Sender(netns, forger, target, 0xd000 + (os.getpid() & 0xfff), transparent=False)
        self.next_psn = 0x3f0000

    def pair(self, env=None, **kw):
        self.next_psn = (self.next_psn + 0x10101) & 0xffffff
        return Pair(env or self.env, psn=self.next_psn, **kw)

    def snapshot(self):
        # The RDMA core answers from the values it read last when asked again within the same
        # jiffy (update_hw_stats): let a few jiffies pass, so that the read is fresh.
        time.sleep(0.05)
        return {n: self.ctr.get(n) for n in ('rcvd_peer_mismatch', 'rcvd_icrc_err', 'rcvd_pkts', 'rcvd_rnr_err')}

    def deltas(self, before):
        after = self.snapshot()
        return {n: (None if before[n] is None or after[n] is None else after[n] - before[n]) for n in before}

    def verdict(self, problems, d, forged_count):
        """Common checks: the ICRC counter did not move (the packets were well formed); the
        mismatch counter moved by `forged_count` (forged cases: a missing counter fails; control
        cases: it must not move if it exists)."""
        if d['rcvd_icrc_err']:
            problems.append(f'rcvd_icrc_err +{d["rcvd_icrc_err"]}: the packets were dropped for a bad ICRC')
        pm = d['rcvd_peer_mismatch']
        if forged_count:
            if pm is None:
                problems.append('no rcvd_peer_mismatch counter')
            elif pm != forged_count:
                problems.append(f'rcvd_peer_mismatch +{pm}, want +{forged_count}')
        elif pm:
            problems.append(f'rcvd_peer_mismatch +{pm} for a legitimate packet')
        detail = ', '.join(f'{k} +{v}' for k, v in d.items() if v is not None)
        return not problems, '; '.join(problems + [detail])

    def wait_rnr(self, before):
        """Waits until Q's SEND got an RNR NAK (it is then outstanding, retried forever)."""
        end = time.time() + 10
        while time.time() < end:
            d = self.deltas(before)['rcvd_rnr_err']
            if d is None:
                time.sleep(1)
                return True
            if d > 0:
                return True
            time.sleep(0.02)
        return False

    # -- SEND to R --

    def send_case(self, sender, forged, qp_type=e.IBV_QPT_RC, env=None):
        p = self.pair(env=env, qp_type=qp_type)
        p.post_recv(wr_id=0x71, offset=0, length=1024)
        p.post_recv(wr_id=0x72, offset=1024, length=1024)
        before = self.snapshot()
        op = RC_SEND_ONLY if qp_type == e.IBV_QPT_RC else UC_SEND_ONLY
        sender.send(bth(op, p.r.qp_num, p.psn, ack_req=qp_type == e.IBV_QPT_RC) + PAYLOAD)
        got = poll(p.rcq, 1, timeout=QUIET if forged else 10)
        problems = []
        if forged:
            if got:
                problems.append(f'R completed {wcs(got)} for the forged SEND'
                                + (' with the forged bytes' if p.rdata(len(PAYLOAD)) == PAYLOAD else ''))
        else:
            if len(got) != 1 or got[0].status != e.IBV_WC_SUCCESS or got[0].byte_len != len(PAYLOAD) \
                    or got[0].wr_id != 0x71:
                problems.append(f'R completions {wcs(got)}, want 0x71:SUCCESS/{len(PAYLOAD)}')
            elif p.rdata(len(PAYLOAD)) != PAYLOAD:
                problems.append('R received other bytes than sent')
        st = p.states()
        if st:
            problems.append(st)
        if forged:
            # Real traffic afterwards: Q's first SEND (R's expected PSN) is delivered.
            real = bytes(range(48))
            p.post_send(real, wr_id=0x55)
            qc = poll(p.qcq, 1, timeout=10)
            rc = poll(p.rcq, 1, timeout=10)
            if qp_type == e.IBV_QPT_RC and (len(qc) != 1 or qc[0].status != e.IBV_WC_SUCCESS):
                problems.append(f'real SEND: Q completions {wcs(qc)}')
            want_slot = 0x71 if not got else 0x72
            off = 0 if want_slot == 0x71 else 1024
            if len(rc) != 1 or rc[0].status != e.IBV_WC_SUCCESS or rc[0].byte_len != len(real) \
                    or p.rdata(len(real), off) != real:
                problems.append(f'real SEND: R completions {wcs(rc)}, want one SUCCESS/{len(real)} with the bytes')
        return self.verdict(problems, self.deltas(before), 1 if forged else 0)

    # -- RDMA WRITE to R's MR --

    def write_case(self, sender, forged):
        p = self.pair()
        off = 512
        before = self.snapshot()
        sender.send(bth(RC_WRITE_ONLY, p.r.qp_num, p.psn) + reth(p.rmr.buf + off, p.rmr.rkey, len(PAYLOAD))
                    + PAYLOAD)
        problems = []
        want = bytearray(p.pattern)
        if forged:
            time.sleep(QUIET)
            if p.rdata(SIZE) != p.pattern:
                problems.append('R\'s MR changed' + (' to the forged bytes' if p.rdata(len(PAYLOAD), off) == PAYLOAD
                                                      else ''))
        else:
            want[off:off + len(PAYLOAD)] = PAYLOAD
            end = time.time() + 10
            while time.time() < end and p.rdata(SIZE) != bytes(want):
                time.sleep(0.02)
            if p.rdata(SIZE) != bytes(want):
                problems.append('R\'s MR does not hold the written bytes'
                                + (' (unchanged)' if p.rdata(SIZE) == p.pattern else ''))
        got = drain(p.rcq, 0.1)
        if got:
            problems.append(f'R completions {wcs(got)}')
        st = p.states()
        if st:
            problems.append(st)
        if forged:
            # Real WRITE afterwards, at R's expected PSN: it lands.
            real = bytes((0x5a + i) & 0xff for i in range(96))
            p.post_send(real, wr_id=0x56, opcode=e.IBV_WR_RDMA_WRITE, raddr=p.rmr.buf + 2048)
            qc = poll(p.qcq, 1, timeout=10)
            if len(qc) != 1 or qc[0].status != e.IBV_WC_SUCCESS:
                problems.append(f'real WRITE: Q completions {wcs(qc)}')
            elif p.rdata(len(real), 2048) != real:
                problems.append('real WRITE: the bytes did not land (R took it for a duplicate)')
        return self.verdict(problems, self.deltas(before), 1 if forged else 0)

    # -- NAK to Q for its outstanding SEND --

    def nak_case(self, sender, forged):
        """Q's SEND is outstanding: R has no receive posted and answers RNR NAKs, which Q
        retries forever (rnr_retry 7). A NAK (remote access error) for its PSN fails it."""
        p = self.pair(rnr_timer=RNR_TIMER)
        data = bytes((0xa5 ^ i) & 0xff for i in range(80))
        before0 = self.snapshot()
        p.post_send(data, wr_id=0x57)
        if not self.wait_rnr(before0):
            return False, 'Q\'s SEND never got an RNR NAK (setup)'
        early = drain(p.qcq, 0.1)
        if early:
            return False, f'Q completed {wcs(early)} before the NAK (setup)'
        before = self.snapshot()
        sender.send(bth(RC_ACK, p.q.qp_num, p.psn, ack_req=False) + aeth(SYN_NAK_REM_ACCESS, 0))
        got = poll(p.qcq, 1, timeout=QUIET if forged else 10)
        problems = []
        if not forged:
            if len(got) != 1 or got[0].status != e.IBV_WC_REM_ACCESS_ERR or got[0].wr_id != 0x57:
                problems.append(f'Q completions {wcs(got)}, want 0x57:REM_ACCESS_ERR')
            return self.verdict(problems, self.deltas(before), 0)
        if got:
            problems.append(f'Q completed {wcs(got)} on the forged NAK')
        st = p.states()
        if st:
            problems.append(st)
        # R posts the receive: Q's SEND is delivered on its next RNR retry.
        p.post_recv(wr_id=0x73)
        qc = got or poll(p.qcq, 1, timeout=10)
        rc = poll(p.rcq, 1, timeout=10)
        if not got and (len(qc) != 1 or qc[0].status != e.IBV_WC_SUCCESS or qc[0].wr_id != 0x57):
            problems.append(f'Q completions after R\'s receive {wcs(qc)}, want 0x57:SUCCESS')
        if len(rc) != 1 or rc[0].status != e.IBV_WC_SUCCESS or p.rdata(len(data)) != data:
            problems.append(f'R completions {wcs(rc)}, want SUCCESS/{len(data)} with the bytes')
        st = p.states()
        if st:
            problems.append('at the end: ' + st)
        return self.verdict(problems, self.deltas(before), 1)

    # -- ACK to Q for its outstanding WRITE --

    def ack_case(self, sender, forged):
        """Q's RDMA WRITE is sent and waits for its ACK: R is still in INIT, so it drops the
        request (Q's ACK timer, `timeout` 18 = 1.07 s, would resend it). An ACK for its PSN
        completes it although nothing was written. (The NAK case's RNR wait does not do for an
        ACK: there roxe's requester has rewound the SEND to resend it, and an ACK for a request
        not fully sent completes nothing.)"""
        p = self.pair(r_ready=False, timeout=18)
        off, data = 256, bytes((0x3c + 5 * i) & 0xff for i in range(80))
        p.post_send(data, wr_id=0x58, opcode=e.IBV_WR_RDMA_WRITE, raddr=p.rmr.buf + off)
        early = drain(p.qcq, 0.3)
        if early:
            return False, f'Q completed {wcs(early)} before the ACK (setup)'
        before = self.snapshot()
        sender.send(bth(RC_ACK, p.q.qp_num, p.psn, ack_req=False) + aeth(SYN_ACK, 1))
        got = poll(p.qcq, 1, timeout=QUIET if forged else 10)
        problems = []
        if not forged:
            if len(got) != 1 or got[0].status != e.IBV_WC_SUCCESS or got[0].wr_id != 0x58:
                problems.append(f'Q completions {wcs(got)}, want 0x58:SUCCESS')
            if p.rdata(SIZE) != p.pattern:
                problems.append('R\'s MR changed (R in INIT should have dropped the WRITE)')
            return self.verdict(problems, self.deltas(before), 0)
        if got:
            problems.append(f'Q completed {wcs(got)} on the forged ACK'
                            + (' with nothing written' if p.rdata(SIZE) == p.pattern else ''))
        if qp_state(p.q) != e.IBV_QPS_RTS:
            problems.append(f'Q state {qp_state(p.q)}')
        # R comes up: Q's next resend lands and is acknowledged for real.
        p.r_up()
        qc = got or poll(p.qcq, 1, timeout=15)
        if not got and (len(qc) != 1 or qc[0].status != e.IBV_WC_SUCCESS or qc[0].wr_id != 0x58):
            problems.append(f'Q completions after R came up {wcs(qc)}, want 0x58:SUCCESS')
        want = bytearray(p.pattern)
        want[off:off + len(data)] = data
        end = time.time() + (0 if got else 5)
        while time.time() < end and p.rdata(SIZE) != bytes(want):
            time.sleep(0.02)
        if p.rdata(SIZE) != bytes(want):
            problems.append('R\'s MR does not hold the WRITE\'s bytes')
        st = p.states()
        if st:
            problems.append('at the end: ' + st)
        return self.verdict(problems, self.deltas(before), 1)


UD_SEND_ONLY = 0x64
MCAST_GROUPS = 8192          # the device's max_mcast_grp
MCAST_PACKETS = 2000         # packets a round
MCAST_ROUNDS = 5
MCAST_COST_RATIO = 1.8       # a multicast-QPN packet with every group attached, against none
MCAST_IP_GROUP = '239.1.2.3'


class _QpCap(ctypes.Structure):
    _fields_ = [('max_send_wr', ctypes.c_uint32), ('max_recv_wr', ctypes.c_uint32),
                ('max_send_sge', ctypes.c_uint32), ('max_recv_sge', ctypes.c_uint32),
                ('max_inline_data', ctypes.c_uint32)]


class _QpInitAttr(ctypes.Structure):
    _fields_ = [('qp_context', ctypes.c_void_p), ('send_cq', ctypes.c_void_p),
                ('recv_cq', ctypes.c_void_p), ('srq', ctypes.c_void_p), ('cap', _QpCap),
                ('qp_type', ctypes.c_int), ('sq_sig_all', ctypes.c_int)]


class McastQp:
    """A UD QP of device `dev`, made through libibverbs itself (pyverbs has no attach_mcast),
    to attach to groups; everything it holds goes with `close`."""

    def __init__(self, dev):
        v = self.v = ctypes.CDLL('libibverbs.so.1', use_errno=True)
        for name, res in (('ibv_get_device_list', ctypes.c_void_p), ('ibv_get_device_name', ctypes.c_char_p),
                          ('ibv_open_device', ctypes.c_void_p), ('ibv_alloc_pd', ctypes.c_void_p),
                          ('ibv_create_cq', ctypes.c_void_p), ('ibv_create_qp', ctypes.c_void_p)):
            getattr(v, name).restype = res
        v.ibv_get_device_name.argtypes = [ctypes.c_void_p]
        v.ibv_open_device.argtypes = [ctypes.c_void_p]
        v.ibv_alloc_pd.argtypes = [ctypes.c_void_p]
        v.ibv_create_cq.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        v.ibv_create_qp.argtypes = [ctypes.c_void_p, ctypes.POINTER(_QpInitAttr)]
        v.ibv_attach_mcast.argtypes = v.ibv_detach_mcast.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                                     ctypes.c_uint16]
        for name in ('ibv_destroy_qp', 'ibv_destroy_cq', 'ibv_dealloc_pd', 'ibv_close_device'):
            getattr(v, name).argtypes = [ctypes.c_void_p]
        n = ctypes.c_int(0)
        lst = ctypes.cast(v.ibv_get_device_list(ctypes.byref(n)), ctypes.POINTER(ctypes.c_void_p))
        found = [lst[i] for i in range(n.value) if v.ibv_get_device_name(lst[i]).decode() == dev]
        assert found, f'no device {dev}'
        self.ctx = v.ibv_open_device(found[0])
        v.ibv_free_device_list(lst)
        self.pd = v.ibv_alloc_pd(self.ctx)
        self.cq = v.ibv_create_cq(self.ctx, 4, None, None, 0)
        attr = _QpInitAttr(send_cq=self.cq, recv_cq=self.cq, cap=_QpCap(1, 1, 1, 1, 0), qp_type=4)  # IBV_QPT_UD
        self.qp = v.ibv_create_qp(self.pd, ctypes.byref(attr))
        assert self.ctx and self.pd and self.cq and self.qp, 'UD QP setup failed'

    def attach(self, gid):
        rc = self.v.ibv_attach_mcast(self.qp, gid, 0)
        if rc:
            raise OSError(rc, f'ibv_attach_mcast: {os.strerror(rc)}')

    def detach(self, gid):
        rc = self.v.ibv_detach_mcast(self.qp, gid, 0)
        if rc:
            raise OSError(rc, f'ibv_detach_mcast: {os.strerror(rc)}')

    def close(self):
        v = self.v
        v.ibv_destroy_qp(self.qp)
        v.ibv_destroy_cq(self.cq)
        v.ibv_dealloc_pd(self.pd)
        v.ibv_close_device(self.ctx)


def mcast_cost(t, dev, netns, target, forger):
    """See the module's docstring: per-packet time of packets to QPN 0xFFFFFF with no group
    and with 8192 groups attached."""
    ud = McastQp(dev)
    # The low 32 bits are the same for every group: one Ethernet filter entry (33:33:00:00:00:01).
    gids = [b'\xff\x0e\x00\x00' + struct.pack('!H', i) + b'\x00' * 6 + b'\x00\x00\x00\x01'
            for i in range(MCAST_GROUPS)]
    joined = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    msender = None
    try:
        # IP takes the multicast datagrams only for a group the host joined on that interface.
        joined.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                          socket.inet_aton(MCAST_IP_GROUP) + socket.inet_aton(target))
        msender = Sender(netns, forger, MCAST_IP_GROUP, 0xe000 + (os.getpid() & 0xfff), transparent=False)
        msender.sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(forger))
        msender.sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)

        def ud_send(qpn):
            return bth(UD_SEND_ONLY, qpn, 0, ack_req=False) + struct.pack('!II', 0x11111111, 1) + PAYLOAD

        def round_us(sender, transport):
            """Per-packet microseconds of one round, from the first send until the device
            counted every packet; None if they did not all arrive."""
            pkt = sender.packet(transport)
            before = t.ctr.get('rcvd_pkts')
            start = time.monotonic()
            for _ in range(MCAST_PACKETS):
                sender.sock.sendto(pkt, (sender.dst, 4791))
            deadline = start + 60
            while time.monotonic() < deadline:
                if t.ctr.get('rcvd_pkts') - before >= MCAST_PACKETS:
                    return (time.monotonic() - start) * 1e6 / MCAST_PACKETS
                time.sleep(0.005)
            return None

        kinds = (('unicast-dgid', t.forger, ud_send(0xffffff)), ('unattached-group', msender, ud_send(0xffffff)))

        def measure():
            """Median per-packet time of each kind over the rounds."""
            times = {k: [] for k, _, _ in kinds}
            for _ in range(MCAST_ROUNDS):
                for k, sender, transport in kinds:
                    us = round_us(sender, transport)
                    if us is None:
                        raise AssertionError(f'{k}: not all {MCAST_PACKETS} packets arrived (rcvd_pkts)')
                    times[k].append(us)
            return {k: statistics.median(v) for k, v in times.items()}

        try:
            drops0 = t.ctr.get('rcvd_drops')
            alone = measure()
            # With no group attached no packet has a QP to go to: each is a counted drop.
            time.sleep(0.05)
            dropped = t.ctr.get('rcvd_drops') - drops0
            if dropped != len(kinds) * MCAST_ROUNDS * MCAST_PACKETS:
                return False, (f'rcvd_drops +{dropped} for {len(kinds) * MCAST_ROUNDS * MCAST_PACKETS} '
                               'packets to QPN 0xFFFFFF with no group attached')
            t0 = time.monotonic()
            for g in gids:
                ud.attach(g)
            attach_s = time.monotonic() - t0
            full = measure()
            ratio = {k: full[k] / alone[k] for k in full}
            again = ''
            if max(ratio.values()) > MCAST_COST_RATIO:
                # The phases run one after the other, so a load that comes and goes on the host
                # (the other VMs of make test) can land on one of them: both are measured once
                # more, the groups detached and attached again, and the pair with the lower
                # ratio counts. A scanned table makes every packet slower (2.83 and 2.87 times
                # before the hash, testing.md), in any measurement.
                for g in gids:
                    ud.detach(g)
                alone2 = measure()
                for g in gids:
                    ud.attach(g)
                full2 = measure()
                again = (' (over the limit once: ' +
                         ', '.join(f'{k} {alone[k]:.1f} / {full[k]:.1f}, then {alone2[k]:.1f} / {full2[k]:.1f} us'
                                   for k in full) + ')')
                for k in full:
                    if full2[k] / alone2[k] < ratio[k]:
                        alone[k], full[k], ratio[k] = alone2[k], full2[k], full2[k] / alone2[k]
        except AssertionError as ex:
            return False, str(ex)
        detail = (f'per packet (median of {MCAST_ROUNDS} rounds of {MCAST_PACKETS}), no group / '
                  f'{MCAST_GROUPS} groups (attached in {attach_s:.1f} s): ' +
                  ', '.join(f'{k} {alone[k]:.1f} / {full[k]:.1f} us ({ratio[k]:.2f}x)' for k in full) +
                  f'; limit {MCAST_COST_RATIO}x; with no group, rcvd_drops +{dropped}{again}')
        return max(ratio.values()) <= MCAST_COST_RATIO, detail
    finally:
        if msender is not None:
            msender.sock.close()
        joined.close()
        # Destroying the QP detaches it from every group.
        ud.close()


def main():
    dev, gid_index, netns, target, forger = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    rep = Report('peer')
    if not rep.run('icrc-known-answers', icrc_known_answers):
        rep.finish()
    gid6, target6 = (int(sys.argv[6]), sys.argv[7]) if len(sys.argv) > 7 else (None, None)
    t = Test(dev, gid_index, netns, target, forger, gid6, target6)
    L, F = t.legit, t.forger
    rep.run('control-send', lambda: t.send_case(L, False))
    rep.run('control-uc-send', lambda: t.send_case(L, False, e.IBV_QPT_UC))
    rep.run('control-write', lambda: t.write_case(L, False))
    rep.run('control-nak', lambda: t.nak_case(L, False))
    rep.run('control-ack', lambda: t.ack_case(L, False))
    rep.run('forged-send', lambda: t.send_case(F, True))
    rep.run('forged-uc-send', lambda: t.send_case(F, True, e.IBV_QPT_UC))
    rep.run('forged-write', lambda: t.write_case(F, True))
    rep.run('forged-nak', lambda: t.nak_case(F, True))
    rep.run('forged-ack', lambda: t.ack_case(F, True))
    if t.own6:
        rep.run('own-source-v6-send', lambda: t.send_case(t.own6, True, env=t.env6))
    rep.run('mcast-8192-groups', lambda: mcast_cost(t, dev, netns, target, forger))
    rep.finish()


if __name__ == '__main__':
    main()
