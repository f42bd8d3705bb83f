#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A flood of duplicate RDMA READ requests must cost the responder little per duplicate.

  dup_read.py DEV GID_INDEX NETNS ADDR PEER_ADDR SECONDS MARK STOP

DEV sits on a veth whose address is ADDR; the veth's other end is in network namespace NETNS,
which holds PEER_ADDR. This program is the legitimate peer of one RC QP R of DEV: R is connected
to PEER_ADDR (and a QP number there that nothing answers from), and the RoCEv2 packets for R are
built here (BTH, RETH, ICRC) and sent from PEER_ADDR by a UDP socket in NETNS; R's responses
arrive at a socket bound to PEER_ADDR:4791 there.

- first-read: a 1 MiB RDMA READ at R's expected PSN (set as rq_psn at RTR), naming R's 1 MiB MR
  (remote read access), path MTU 1024: all 1024 READ responses arrive, with the MR's bytes, in
  order, and nothing counts as a duplicate. This proves the packets are right, so that the
  flood below is made of duplicates the responder takes.
- The same request again, as fast as this process can send it, for SECONDS and until the file
  STOP exists (at most 4 * SECONDS + 60 s). Once R has answered the READ, a request with its
  PSN is a duplicate (IBA 9.7.5.1), which R answers from its responder resources by replaying
  the READ's responses (rdma_rxe `duplicate_request`). One request (a 60-byte IP packet) must
  not be worth a burst of MTU-sized responses built with the QP's lock held: a requester that
  lost a response asks again after its ACK timeout, so a replay needs no more than a restart
  of the stream that the responder paces anyway.
  - flood: the device's `duplicate_request` counter rose by at least half the duplicates sent
    (the flood reached the responder; the rest may have been dropped in the receive queue).
  - egress-per-duplicate: what the device sent towards the peer meanwhile (the UDP datagrams
    the namespace received: READ responses) is at most 16 packets per duplicate counted.
    Answering each duplicate with an inline burst of up to 256 responses gives about 256.
- after: R is still in RTS, and a new 4 KiB READ at the next PSN gets its responses.
- dup-send-behind-read: R is reset to its first PSN and gets a 64-byte SEND, then a 1 MiB
  READ; once the first READ response has arrived, the SEND again, as a requester whose
  retransmission timer fired before the SEND's ACK came sends it (followed by the READ, which
  this case leaves out). The READ goes once the SEND's ACK is in. The READ's responses
  implicitly acknowledge the SEND; an ACK of the duplicate would be older than them, and
  rdma_rxe's completer, in the middle of that READ, takes such an ACK for the READ's end and
  fails the QP with a WARN (rxe_comp.c, COMPST_ERROR). So: all READ responses arrive, no
  ACKNOWLEDGE with a PSN before the READ's arrives after its first response, the receive
  completes once with the SEND's bytes, duplicate_request rises, and R stays in RTS.

- reads-queued: R is reset to its first PSN, with a responder depth of 4, and gets three READ
  requests back to back: 1 MiB, 4 KiB and 64 bytes. The first one's reply goes out in paced
  bursts, and the two behind it arrive while it does; they wait for it, and their responses
  follow its last one (IBA 9.5). So: every response of the three arrives, once, in PSN order,
  with the MR's bytes, no other packet (a NAK) comes, nothing counts as a duplicate (each
  request was sent once), and R stays in RTS. A responder that drops requests behind a READ
  reply leaves the last two unanswered until the requester asks again.

MARK is a file created when the flood starts, holding the time (the guest script runs
ibv_rc_pingpong beside the flood and creates STOP when it is done).
One PASS/FAIL line per check.
"""
import errno, os, socket, struct, sys, time
import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.wr import RecvWR, SGE

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import (ROCE_PORT, Counters, Env, ForgedPeer, Report, bth, icrc_known_answers, in_netns, poll, qp_state,
                     reth)

# BTH opcodes (IBA 9.2, drivers/infiniband/sw/roxe/proto/opcode.rs).
RC_SEND_ONLY, RC_READ_REQUEST, RC_ACK = 0x04, 0x0c, 0x11
READ_RESPONSES = {0x0d: 'FIRST', 0x0e: 'MIDDLE', 0x0f: 'LAST', 0x10: 'ONLY'}
SIZE = 1 << 20
MTU = 1024
COUNT = SIZE // MTU
PSN0 = 0x5a0f00
PEER_QPN = 0x4242
# A bound on what the device may send per duplicate: a few packets to restart or continue a
# paced stream, far below the 256-response burst.
MAX_PER_DUP = 16
SLOW = 30.0   # how long the responses of one READ may take (the debug kernel under TCG)


def udp_received(snmp):
    """UDP datagrams received in the namespace of the open /proc/net/snmp `snmp` (taken, dropped
    for a full buffer or for no socket): READ responses counted one by one, after segmentation
    (the device sends its responses in batches, which a veth carries as one packet)."""
    snmp.seek(0)
    rows = [line.split() for line in snmp.read().splitlines() if line.startswith('Udp:')]
    udp = dict(zip(rows[0][1:], (int(v) for v in rows[1][1:])))
    return udp['InDatagrams'] + udp['NoPorts'] + udp['InErrors']


def response_of(pkt):
    """(opcode, BTH PSN, payload) of an answer from the device: the payload of a READ response
    without its AETH, pad and ICRC; None for any other answer."""
    op, flags, _pkey, _qpn, psn = struct.unpack('!BBHII', pkt[:12])
    payload = None
    if op in READ_RESPONSES:
        hdr = 12 + (4 if READ_RESPONSES[op] != 'MIDDLE' else 0)
        payload = pkt[hdr:len(pkt) - 4 - ((flags >> 4) & 3)]
    return op, psn & 0xffffff, payload


def tx_dropped(name='vpc0'):
    """Batches the veth dropped on transmit (its peer's receive queue had no room)."""
    with open(f'/sys/class/net/{name}/statistics/tx_dropped') as f:
        return int(f.read())


class Test:
    def __init__(self, dev, gid_index, netns, addr, peer):
        self.env = Env(dev, gid_index)
        self.ctr = Counters(dev)
        self.peer = ForgedPeer(self.env, gid_index, netns, addr, peer, PEER_QPN, PSN0, e.IBV_ACCESS_REMOTE_READ)
        self.qp, self.tx, self.rx = self.peer.qp, self.peer.tx, self.peer.rx
        self.mr = MR(self.env.pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ)
        self.data = os.urandom(SIZE)
        self.mr.write(self.data, SIZE)
        self.snmp = in_netns(netns, lambda: open('/proc/self/net/snmp'))
        self.request = bth(RC_READ_REQUEST, self.qp.qp_num, PSN0) + reth(self.mr.buf, self.mr.rkey, SIZE)

    def snapshot(self):
        # The RDMA core answers from the values it read last when asked again within the same
        # jiffy (update_hw_stats): let a few jiffies pass, so that the read is fresh.
        time.sleep(0.05)
        c = {n: self.ctr.get(n) for n in ('duplicate_request', 'sent_pkts', 'rcvd_pkts', 'rcvd_drops',
                                          'rcvd_icrc_err', 'rcvd_peer_mismatch')}
        c['egress'] = udp_received(self.snmp)
        c['tx_dropped'] = tx_dropped()
        return c

    def deltas(self, before):
        after = self.snapshot()
        return {n: (None if before[n] is None or after[n] is None else after[n] - before[n]) for n in before}

    def answers(self, end, more):
        """The device's answers as they arrive, while `more()` holds and until time `end`."""
        while more() and time.time() < end:
            self.rx.settimeout(max(0.01, end - time.time()))
            try:
                yield self.rx.recv(4096)
            except socket.timeout:
                return

    def read_reply(self, first_psn, va_offset, length, timeout):
        """Collects the READ responses to a READ of `length` bytes at PSN `first_psn`; returns
        a list of problems (empty when every response arrived, in order, with the MR's bytes
        from `va_offset` on)."""
        count = max(1, -(-length // MTU))
        got, problems, others = {}, [], 0
        for pkt in self.answers(time.time() + timeout, lambda: len(got) < count):
            if len(pkt) < 16:
                others += 1
                continue
            op, flags, _pkey, qpn, psn = struct.unpack('!BBHII', pkt[:12])
            qpn &= 0xffffff
            psn &= 0xffffff
            i = (psn - first_psn) & 0xffffff
            if op not in READ_RESPONSES or qpn != PEER_QPN or i >= count:
                others += 1
                continue
            hdr = 12 + (4 if READ_RESPONSES[op] != 'MIDDLE' else 0)
            if hdr == 16 and pkt[12] >> 5 != 0:
                problems.append(f'PSN {psn:#x}: AETH syndrome {pkt[12]:#x} is no ACK')
            pad = (flags >> 4) & 3
            want_op = ('ONLY' if count == 1 else 'FIRST' if i == 0 else 'LAST' if i == count - 1 else 'MIDDLE')
            if READ_RESPONSES[op] != want_op:
                problems.append(f'PSN {psn:#x}: {READ_RESPONSES[op]}, want {want_op}')
            got[i] = pkt[hdr:len(pkt) - 4 - pad]
        if len(got) < count:
            problems.append(f'{len(got)} of {count} responses arrived in {timeout:.0f} s'
                            + (f' (first missing: PSN {min(set(range(count)) - set(got)) + first_psn:#x})'))
        elif b''.join(got[i] for i in range(count)) != self.data[va_offset:va_offset + length]:
            problems.append('the responses do not carry the MR\'s bytes')
        if others:
            problems.append(f'{others} other packets')
        return problems

    def first_read(self):
        before = self.snapshot()
        t0 = time.time()
        self.tx.send(self.request)
        problems = self.read_reply(PSN0, 0, SIZE, SLOW)
        took = time.time() - t0
        d = self.deltas(before)
        if d['duplicate_request']:
            problems.append(f'duplicate_request +{d["duplicate_request"]} for a new READ')
        if d['rcvd_icrc_err']:
            problems.append(f'rcvd_icrc_err +{d["rcvd_icrc_err"]}: the request was dropped for a bad ICRC')
        if qp_state(self.qp) != e.IBV_QPS_RTS:
            problems.append(f'R state {qp_state(self.qp)}')
        return not problems, '; '.join(problems + [f'{COUNT} responses in {took:.2f} s, egress +{d["egress"]}'])

    def flood(self, seconds, mark, stop):
        """Sends the READ again and again for `seconds` and until file `stop` exists; returns
        (sent, send errors, seconds, counter deltas, seconds the device took to go quiet
        afterwards)."""
        pkt = self.tx.packet(self.request)
        send, dst = self.tx.sock.sendto, (self.tx.dst, ROCE_PORT)
        before = self.snapshot()
        with open(mark, 'w') as f:
            f.write(f'{time.time()}\n')
        tries = errors = 0
        t0 = time.monotonic()
        end, limit = t0 + seconds, t0 + 4 * seconds + 60
        clock, checked = time.monotonic, t0
        while True:
            try:
                send(pkt, dst)
            except OSError as ex:
                if ex.errno not in (errno.ENOBUFS, errno.EAGAIN):
                    raise
                errors += 1
            tries += 1
            now = clock()
            if now >= end and now - checked >= 0.1:
                checked = now
                if os.path.exists(stop) or now >= limit:
                    break
        took = time.monotonic() - t0
        # Duplicates still queued for the device are answered after the last one was sent:
        # count until the device has been quiet for a second.
        t1 = time.monotonic()
        last = None
        while time.monotonic() - t1 < 120:
            time.sleep(1)
            now = (self.ctr.get('duplicate_request'), udp_received(self.snmp))
            if now == last:
                break
            last = now
        quiet = time.monotonic() - t1
        return tries - errors, errors, took, self.deltas(before), quiet

    def after(self):
        """R still answers: a new 4 KiB READ at its next expected PSN, sent again (as a
        requester's retry would) until its responses come."""
        problems = []
        if qp_state(self.qp) != e.IBV_QPS_RTS:
            return False, f'R state {qp_state(self.qp)}'
        self.peer.drain()
        off, length = 8192, 4096
        req = bth(RC_READ_REQUEST, self.qp.qp_num, PSN0 + COUNT) + reth(self.mr.buf + off, self.mr.rkey, length)
        for attempt in range(5):
            self.tx.send(req)
            problems = self.read_reply(PSN0 + COUNT, off, length, 3)
            if not problems:
                return True, f'answered on attempt {attempt + 1}'
        return False, '; '.join(problems)

    def dup_send_behind_read(self):
        """A duplicate SEND behind a READ executed after it gets no ACK (module docstring)."""
        self.peer.rearm()
        self.peer.drain()
        rbuf = MR(self.env.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        self.qp.post_recv(RecvWR(wr_id=0x5e, num_sge=1, sg=[SGE(rbuf.buf, 4096, rbuf.lkey)]))
        payload = bytes((0x5a ^ i) & 0xff for i in range(64))
        send = bth(RC_SEND_ONLY, self.qp.qp_num, PSN0) + payload
        read_psn = (PSN0 + 1) & 0xffffff
        before = self.snapshot()
        # The READ goes once the SEND's ACK is in: sent back to back, the two could be reordered
        # between CPUs on the way (veth), and the READ would meet a sequence NAK instead.
        self.tx.send(send)
        first = self.peer.next_answer(SLOW)
        if first is None or first[0] != RC_ACK or struct.unpack('!I', first[8:12])[0] & 0xffffff != PSN0 \
                or first[12] >> 5 != 0:
            return False, f'the SEND got {first[:16].hex() if first else "no answer"}, want its ACK'
        self.tx.send(bth(RC_READ_REQUEST, self.qp.qp_num, read_psn) + reth(self.mr.buf, self.mr.rkey, SIZE))
        got, acks, dup_sent, late = {}, [], False, []
        end = time.time() + SLOW
        # Until every response is in, then a second for anything sent late.
        while time.time() < end:
            self.rx.settimeout(max(0.01, end - time.time()))
            try:
                pkt = self.rx.recv(4096)
            except socket.timeout:
                break
            op, psn, data = response_of(pkt)
            if op == RC_ACK:
                acks.append(psn)
                if got and ((psn - read_psn) & 0xffffff) >= 1 << 23:
                    late.append(psn)
            if data is not None:
                got[(psn - read_psn) & 0xffffff] = data
                if not dup_sent:
                    self.tx.send(send)
                    dup_sent = True
            if len(got) >= COUNT and end - time.time() > 1:
                end = time.time() + 1
        problems = []
        if len(got) < COUNT:
            problems.append(f'{len(got)} of {COUNT} READ responses arrived')
        elif b''.join(got.get(i, b'') for i in range(COUNT)) != self.data:
            problems.append('the READ responses do not carry the MR\'s bytes')
        if late:
            problems.append(f'the duplicate SEND was acknowledged behind READ responses: ACKs {[hex(a) for a in acks]}')
        wcs = poll(self.peer.cq, n=2, timeout=0.5)
        recv = [w for w in wcs if w.wr_id == 0x5e]
        if len(recv) != 1 or recv[0].status != e.IBV_WC_SUCCESS or recv[0].byte_len != len(payload):
            problems.append(f'receive completions {[(w.wr_id, w.status, w.byte_len) for w in wcs]}, want one of 64 bytes')
        elif rbuf.read(len(payload), 0) != payload:
            problems.append('the receive buffer does not hold the SEND\'s bytes')
        d = self.deltas(before)
        if not d['duplicate_request']:
            problems.append(f'duplicate_request +{d["duplicate_request"]}: the duplicate did not reach R')
        if qp_state(self.qp) != e.IBV_QPS_RTS:
            problems.append(f'R state {qp_state(self.qp)}')
        return not problems, '; '.join(problems or [f'{len(got)} READ responses, ACKs {[hex(a) for a in acks]}, '
                                                    f'duplicate_request +{d["duplicate_request"]}'])

    def reads_queued(self):
        """Pipelined READs behind a long one are answered in order, each asked for once (module
        docstring)."""
        self.peer.attr.max_dest_rd_atomic = 4
        self.peer.rearm()
        self.peer.drain()
        plan, psn = [], PSN0
        for off, length in ((0, SIZE), (8192, 4096), (64, 64)):
            plan.append((psn, off, length))
            psn = (psn + max(1, -(-length // MTU))) & 0xffffff
        total = (psn - PSN0) & 0xffffff
        before = self.snapshot()
        for p, off, length in plan:
            self.tx.send(bth(RC_READ_REQUEST, self.qp.qp_num, p) + reth(self.mr.buf + off, self.mr.rkey, length))
        got, order, others = {}, [], []
        for pkt in self.answers(time.time() + SLOW, lambda: len(got) < total):
            op, p, payload = response_of(pkt)
            i = (p - PSN0) & 0xffffff
            if payload is None or i >= total:
                others.append(f'{op:#x}@{p:#x}')
                continue
            got[i] = payload
            order.append(i)
        problems = []
        for p, off, length in plan:
            first = (p - PSN0) & 0xffffff
            n = max(1, -(-length // MTU))
            parts = [got.get(first + k) for k in range(n)]
            if None in parts:
                problems.append(f'READ at PSN {p:#x}: {n - parts.count(None)} of {n} responses arrived')
            elif b''.join(parts) != self.data[off:off + length]:
                problems.append(f'READ at PSN {p:#x}: the responses do not carry the MR\'s bytes')
        if order != sorted(set(order)):
            problems.append('responses out of PSN order or repeated')
        if others:
            problems.append(f'other packets: {others[:8]}')
        d = self.deltas(before)
        if d['duplicate_request']:
            problems.append(f'duplicate_request +{d["duplicate_request"]}: a request was handled twice')
        if qp_state(self.qp) != e.IBV_QPS_RTS:
            problems.append(f'R state {qp_state(self.qp)}')
        return not problems, '; '.join(problems or [f'{len(got)} responses to {len(plan)} READs, in order'])


def main():
    dev, gid_index, netns, addr, peer = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    seconds, mark, stop = float(sys.argv[6]), sys.argv[7], sys.argv[8]
    rep = Report('dupread')
    if not rep.run('icrc-known-answers', icrc_known_answers):
        rep.finish()
    t = Test(dev, gid_index, netns, addr, peer)
    if not rep.run('first-read', t.first_read):
        rep.finish()
    sent, errors, took, d, quiet = t.flood(seconds, mark, stop)
    dups = d['duplicate_request'] or 0
    print(f'dupread: flood of {sent} duplicates in {took:.1f} s ({sent / took:.0f}/s, {errors} send errors); '
          f'the device went quiet {quiet:.0f} s after; '
          + ', '.join(f'{k} +{v}' for k, v in d.items() if v is not None), flush=True)
    rep.check('flood', d['duplicate_request'] is not None and dups * 2 >= sent,
              f'duplicate_request +{d["duplicate_request"]} of {sent} sent'
              + (f' ({100 * dups / sent:.0f}%)' if sent else '') + ', want at least 50%')
    per = d['egress'] / dups if dups else float('inf')
    rep.check('egress-per-duplicate', dups > 0 and per <= MAX_PER_DUP,
              f'{d["egress"]} packets sent towards the peer for {dups} duplicates: {per:.1f} per duplicate, '
              f'want <= {MAX_PER_DUP}; sent_pkts +{d["sent_pkts"]}, vpc0 tx_dropped +{d["tx_dropped"]}')
    rep.run('after', t.after)
    rep.run('dup-send-behind-read', t.dup_send_behind_read)
    rep.run('reads-queued', t.reads_queued)
    rep.finish()


if __name__ == '__main__':
    main()
