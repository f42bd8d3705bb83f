#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""ATOMIC WRITE writes exactly 8 bytes (IBA Annex A19; rdma_rxe cites oA19-28): a request of
any other length is refused, by the requester and by the responder.

  atomic_write.py DEV GID_INDEX NETNS ADDR PEER_ADDR

Responder: DEV sits on a veth whose address is ADDR; its other end is in network namespace
NETNS, which holds PEER_ADDR. This program is the peer of one RC QP R of DEV (qemu/tests/py/
ringlib.py ForgedPeer): it builds R's request packets (BTH, RETH, payload, ICRC), sends them
from PEER_ADDR and reads R's answers there. R's MR holds a pattern.
- control: an ATOMIC WRITE with RETH length 8 and 8 bytes of payload at R's expected PSN is
  acknowledged (an RDMA READ response without payload, as IBA A19 answers it) and puts exactly
  those 8 bytes into the MR.
- length-4, length-16, reth-8-payload-4: RETH length 4 with 4 bytes, RETH length 16 with 16
  bytes, RETH length 8 with 4 bytes: each gets a NAK with the invalid-request syndrome, the MR
  keeps its bytes and R goes to the error state (R is reset and connected again between cases).
Requester: two RC QPs of DEV in loopback through its own GID; an ATOMIC WRITE WQE written into
the send queue with length 4 completes with IBV_WC_LOC_LEN_ERR and leaves the peer's memory as
it was; one with length 8 (control) completes successfully and writes its 8 bytes.
One PASS/FAIL line per check.
"""
import os, struct, sys
import pyverbs.enums as e
from pyverbs.mr import MR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import (REMOTE_ALL, Env, ForgedPeer, Report, connect, doorbell, drain, icrc_known_answers,
                     make_cq, make_qp, poll, qp_state, rdma_wr, reth, send_wqe, bth, wcname)

PEER_QPN = 0x4242
PSN0 = 0x2000
SIZE = 4096
RC_ATOMIC_WRITE = 0x1d
RC_READ_RESPONSE_ONLY = 0x10
RC_ACK = 0x11
NAK_INVALID_REQUEST = 0x61
WR_ATOMIC_WRITE = 15  # IBV_WR_ATOMIC_WRITE


class Responder:
    def __init__(self, dev, gid_index, netns, addr, peer):
        self.env = Env(dev, gid_index)
        self.peer = ForgedPeer(self.env, gid_index, netns, addr, peer, PEER_QPN, PSN0,
                               e.IBV_ACCESS_REMOTE_WRITE)
        self.qp = self.peer.qp
        self.mr = MR(self.env.pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
        self.pattern = bytes((7 * i + 1) & 0xff for i in range(SIZE))
        self.mr.write(self.pattern, SIZE)
        self.want = bytearray(self.pattern)

    def answer(self, psn):
        """(opcode, AETH syndrome or None) of R's answer to the request with `psn`, or None."""
        for _ in range(20):
            pkt = self.peer.next_answer(3)
            if pkt is None:
                return None
            op, _flags, _pkey, qpn, p = struct.unpack('!BBHII', pkt[:12])
            if qpn & 0xffffff != PEER_QPN or p & 0xffffff != psn:
                continue
            return op, (pkt[12] if op in (RC_ACK, RC_READ_RESPONSE_ONLY) and len(pkt) >= 16 else None)
        return None

    def request(self, dma_len, payload, offset=256):
        """Sends one ATOMIC WRITE at R's expected PSN; returns R's answer and whether the MR
        holds what it should."""
        self.peer.drain()
        req = bth(RC_ATOMIC_WRITE, self.qp.qp_num, PSN0) + reth(self.mr.buf + offset, self.mr.rkey, dma_len)
        pad = (-len(payload)) % 4
        if pad:  # BTH pad count: the payload ends on a 4-byte boundary
            req = req[:1] + bytes([req[1] | (pad << 4)]) + req[2:]
        self.peer.tx.send(req + payload + bytes(pad))
        got = self.answer(PSN0)
        return got, self.mr.read(SIZE, 0) == bytes(self.want)

    def control(self):
        value = struct.pack('=Q', 0x0123456789abcdef)
        got, _ = self.request(8, value)
        self.want[256:264] = value
        mem = self.mr.read(SIZE, 0) == bytes(self.want)
        ok = got is not None and got[0] == RC_READ_RESPONSE_ONLY and got[1] is not None and got[1] >> 5 == 0 and mem
        return ok, f'answer {got}, memory {"has the 8 bytes" if mem else "wrong"}, R state {qp_state(self.qp)}'

    def refused(self, dma_len, payload_len):
        def case():
            self.peer.rearm()
            got, mem = self.request(dma_len, b'\xee' * payload_len)
            st = qp_state(self.qp)
            ok = got is not None and got[1] == NAK_INVALID_REQUEST and mem and st == e.IBV_QPS_ERR
            return ok, (f'answer {got} (want a NAK {NAK_INVALID_REQUEST:#x}), memory '
                        f'{"unchanged" if mem else "changed"}, R state {st}')
        return case


def requester(env):
    pd = env.pd
    cq_a, _ = make_cq(env, 15)
    cq_b, _ = make_cq(env, 15)
    local = MR(pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE)
    remote = MR(pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    pattern = bytes((3 * i + 5) & 0xff for i in range(SIZE))
    results = []
    for name, length, want in (('requester-length-4', 4, e.IBV_WC_LOC_LEN_ERR),
                               ('requester-control', 8, e.IBV_WC_SUCCESS)):
        remote.write(pattern, SIZE)
        qa, sq, _ = make_qp(env, pd, cq_a)
        qb, _, _ = make_qp(env, pd, cq_b)
        connect(env, qa, qb, access_b=REMOTE_ALL)
        value = struct.pack('=Q', 0xfeedfacecafef00d)
        # The 8-byte value travels inline in the WQE (`dma.atomic_wr`); `length` is the WQE's.
        sq.produce(send_wqe(5, WR_ATOMIC_WRITE, wr=rdma_wr(remote.buf + 512, remote.rkey),
                            inline=value, length=length))
        doorbell(env, qa)
        wcs = poll(cq_a, 1) + drain(cq_a, 0.2)
        expect = bytearray(pattern)
        if want == e.IBV_WC_SUCCESS:
            expect[512:520] = value
        mem = remote.read(SIZE, 0) == bytes(expect)
        got = wcs[0].status if wcs else None
        ok = len(wcs) == 1 and got == want and mem
        results.append((name, ok, f'status {wcname(got) if wcs else "none"} (want {wcname(want)}), '
                                  f'peer memory {"as it should be" if mem else "wrong"}, QP state {qp_state(qa)}'))
        qa.close()
        qb.close()
    return results


def main():
    dev, gid_index, netns, addr, peer = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    rep = Report('atomic-write')
    if not rep.run('icrc-known-answers', icrc_known_answers):
        rep.finish()
    r = Responder(dev, gid_index, netns, addr, peer)
    rep.run('control', r.control)
    rep.run('length-4', r.refused(4, 4))
    rep.run('length-16', r.refused(16, 16))
    rep.run('reth-8-payload-4', r.refused(8, 4))
    for name, ok, detail in requester(r.env):
        rep.check(name, ok, detail)
    rep.finish()


if __name__ == '__main__':
    main()
