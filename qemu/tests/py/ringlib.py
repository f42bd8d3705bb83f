# SPDX-License-Identifier: GPL-2.0
"""Shared helpers of the pyverbs tests (stock pyverbs, no compiler).

- loopback RC/UC/UD QPs through the device's own GID, in one process;
- the rings of the rxe ABI (`struct rxe_queue_buf`, Documentation/abi.md) of a CQ, QP or SRQ,
  found by diffing /proc/self/maps around the object's creation, read and written with ctypes;
- raw send WQEs written straight into the SQ, and a doorbell that adds no WQE;
- completion polling with a deadline, and PASS/FAIL reporting;
- hand-built RoCEv2 packets (BTH, RETH, AETH, ICRC) sent from another network namespace, an
  RC QP connected to a peer there whose packets this process builds (`ForgedPeer`), and the
  device's hardware counters.
"""
import ctypes, errno, mmap, os, socket, struct, sys, time, zlib
import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR

REMOTE_ALL = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
              | e.IBV_ACCESS_REMOTE_ATOMIC)
QKEY = 0x11111111

# ib_wc_status names, for readable output.
WC = {getattr(e, n): n[len('IBV_WC_'):] for n in dir(e) if n.startswith('IBV_WC_') and n.endswith('_ERR')}
WC[e.IBV_WC_SUCCESS] = 'SUCCESS'


def wcname(s):
    return WC.get(s, str(s))


class Report:
    """PASS/FAIL lines on stdout; the exit status says whether anything failed."""

    def __init__(self, prefix):
        self.prefix, self.failed, self.passed, self.skipped = prefix, [], 0, []

    def check(self, name, ok, detail=''):
        line = f'{"PASS" if ok else "FAIL"} {self.prefix}:{name}' + (f' ({detail})' if detail else '')
        print(line, flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
        return ok

    def run(self, name, fn):
        """Runs one case: fn returns (ok, detail) or raises (a failure, with the reason)."""
        print(f'-- {self.prefix}:{name}', flush=True)
        try:
            ok, detail = fn()
        except Exception as ex:  # a case that breaks must not stop the others
            ok, detail = False, f'{type(ex).__name__}: {ex}'
        return self.check(name, ok, detail)

    def skip(self, name, reason):
        """A case not run (on this driver), with the reason: a SKIP line, counted neither way."""
        print(f'SKIP {self.prefix}:{name} ({reason})', flush=True)
        self.skipped.append(name)

    def finish(self):
        print(f'{self.prefix}: {self.passed} passed, {len(self.failed)} failed'
              + (f': {" ".join(self.failed)}' if self.failed else '')
              + (f'; skipped: {" ".join(self.skipped)}' if self.skipped else ''), flush=True)
        sys.exit(1 if self.failed else 0)


class Shm:
    """A page shared with the processes this one forks (MAP_SHARED | MAP_ANONYMOUS): `cells`
    u64 cells, read and written by index."""

    def __init__(self, cells=8):
        self.mm = mmap.mmap(-1, 4096)
        self.cells = [ctypes.c_uint64.from_buffer(self.mm, 8 * i) for i in range(cells)]

    def __getitem__(self, i):
        return self.cells[i].value

    def __setitem__(self, i, v):
        self.cells[i].value = v


# ---- rings ----------------------------------------------------------------------------------

def uverbs_maps():
    """Start addresses and sizes of this process's mappings of /dev/infiniband/uverbs*."""
    out = {}
    with open('/proc/self/maps') as f:
        for line in f:
            if '/dev/infiniband/uverbs' in line:
                lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
                out[lo] = hi - lo
    return out


class Ring:
    """One mmap'd rxe ring: header (log2_elem_size @0, index_mask @4, producer @128, consumer
    @256), elements from 384."""

    def __init__(self, addr, size):
        self.addr, self.size = addr, size
        self.log2 = ctypes.c_uint32.from_address(addr).value
        self.mask = ctypes.c_uint32.from_address(addr + 4).value
        self.elem = 1 << self.log2
        self.slots = self.mask + 1
        assert 384 + self.slots * self.elem <= size, f'ring header does not fit its mapping: {self}'

    def __repr__(self):
        return f'Ring({self.addr:#x}, elem {self.elem}, slots {self.slots})'

    @property
    def prod(self):
        return ctypes.c_uint32.from_address(self.addr + 128).value

    @prod.setter
    def prod(self, v):
        ctypes.c_uint32.from_address(self.addr + 128).value = v & 0xffffffff

    @property
    def cons(self):
        return ctypes.c_uint32.from_address(self.addr + 256).value

    @cons.setter
    def cons(self, v):
        ctypes.c_uint32.from_address(self.addr + 256).value = v & 0xffffffff

    def slot(self, i):
        return self.addr + 384 + (i & self.mask) * self.elem

    def write_slot(self, i, data):
        data = bytes(data)[:self.elem].ljust(self.elem, b'\0')
        ctypes.memmove(self.slot(i), data, len(data))

    def fill(self, byte):
        ctypes.memset(self.addr + 384, byte, self.slots * self.elem)

    def read_slot(self, i):
        return ctypes.string_at(self.slot(i), self.elem)

    def produce(self, data):
        """Appends one element as the producer (SQ, RQ, SRQ)."""
        p = self.prod & self.mask
        self.write_slot(p, data)
        self.prod = (p + 1) & self.mask


def new_rings(create):
    """Runs create() and returns (its result, the rings it mapped, by address order)."""
    before = uverbs_maps()
    obj = create()
    after = uverbs_maps()
    rings = [Ring(a, s) for a, s in sorted(after.items()) if a not in before]
    return obj, rings


# ---- WQEs (rdma_user_rxe.h) ------------------------------------------------------------------

SEND_DMA = 184          # struct rxe_send_wqe: dma.length @184, dma.num_sge @196, data @208
SEND_DATA = 208
RECV_DATA = 40          # struct rxe_recv_wqe: dma.length @16, dma.num_sge @28, sge @40


def send_wqe(wr_id, opcode, flags=e.IBV_SEND_SIGNALED, sges=(), num_sge=None, length=None,
             wr=b'', inline=None, ex=0):
    """A raw `struct rxe_send_wqe`. `wr` is the per-opcode union (offset 24, 32 bytes+)."""
    b = bytearray(SEND_DATA + 16 * max(len(sges), 1) + (len(inline) if inline else 0))
    struct.pack_into('=QIIII', b, 0, wr_id, 0, opcode, flags, ex)
    b[24:24 + len(wr)] = wr
    if len(wr) >= 8:  # iova @152 = the remote address, as the provider writes it (rdma_rxe reads it)
        b[152:160] = wr[:8]
    if length is None:
        length = len(inline) if inline is not None else sum(s[1] for s in sges)
    struct.pack_into('=IIIII', b, SEND_DMA, length & 0xffffffff, length & 0xffffffff, 0,
                     len(sges) if num_sge is None else num_sge, 0)
    if inline is not None:
        b[SEND_DATA:SEND_DATA + len(inline)] = inline
    for i, (addr, ln, key) in enumerate(sges):
        struct.pack_into('=QII', b, SEND_DATA + 16 * i, addr, ln & 0xffffffff, key)
    return bytes(b)


def recv_wqe(wr_id, sges=(), num_sge=None):
    b = bytearray(RECV_DATA + 16 * max(len(sges), 1))
    length = sum(s[1] for s in sges) & 0xffffffff
    struct.pack_into('=Q', b, 0, wr_id)
    struct.pack_into('=IIIII', b, 16, length, length, 0, len(sges) if num_sge is None else num_sge, 0)
    for i, (addr, ln, key) in enumerate(sges):
        struct.pack_into('=QII', b, RECV_DATA + 16 * i, addr, ln & 0xffffffff, key)
    return bytes(b)


def rdma_wr(addr, rkey):
    return struct.pack('=QII', addr, rkey, 0)


def atomic_wr(addr, rkey, compare_add, swap=0):
    return struct.pack('=QQQII', addr, compare_add, swap, rkey, 0)


# ---- verbs ----------------------------------------------------------------------------------

class Env:
    """A device context, the loopback GID and a scratch MR for doorbells."""

    def __init__(self, dev, gid_index):
        self.ctx = d.Context(name=dev)
        self.gid_index = gid_index
        self.gid = self.ctx.query_gid(1, gid_index)
        self.pd = PD(self.ctx)
        self.scratch = MR(self.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)


def make_cq(env, n):
    cq, rings = new_rings(lambda: CQ(env.ctx, n))
    assert len(rings) == 1, rings
    return cq, rings[0]


def make_qp(env, pd, cq, qp_type=e.IBV_QPT_RC, send_wr=16, recv_wr=16, send_sge=2, recv_sge=2,
            srq=None, rcq=None, inline=0):
    cap = QPCap(max_send_wr=send_wr, max_recv_wr=recv_wr, max_send_sge=send_sge,
                max_recv_sge=recv_sge, max_inline_data=inline)
    init = QPInitAttr(qp_type=qp_type, scq=cq, rcq=rcq or cq, cap=cap, srq=srq)
    qp, rings = new_rings(lambda: QP(pd, init))
    # The SQ's slots hold the 208-byte WQE header: it is the ring with the larger elements.
    rings.sort(key=lambda r: r.elem)
    sq = rings[-1]
    rq = rings[0] if len(rings) > 1 else None
    assert sq.elem >= 256 and (srq is not None) == (rq is None), rings
    return qp, sq, rq


def make_srq(env, pd, n, sge=2):
    srq, rings = new_rings(lambda: SRQ(pd, SrqInitAttr(SrqAttr(max_wr=n, max_sge=sge))))
    assert len(rings) == 1, rings
    return srq, rings[0]


def connect(env, a, b, access_a=REMOTE_ALL, access_b=REMOTE_ALL, qp_type=e.IBV_QPT_RC):
    """Brings a and b to RTS, each aimed at the other through the device's own GID."""
    for qp, peer, acc in ((a, b, access_a), (b, a, access_b)):
        attr = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
        if qp_type == e.IBV_QPT_UD:
            attr.qkey = QKEY
            qp.to_rts(attr)
            continue
        attr.qp_access_flags = acc
        attr.path_mtu = e.IBV_MTU_1024
        attr.dest_qp_num = peer.qp_num
        attr.rq_psn = 0x100
        attr.sq_psn = 0x100
        attr.max_dest_rd_atomic = 4
        attr.max_rd_atomic = 4
        attr.min_rnr_timer = 1
        attr.timeout = 14
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        attr.ah_attr = AHAttr(gr=GlobalRoute(dgid=env.gid, sgid_index=env.gid_index), is_global=1, port_num=1)
        qp.to_rts(attr)


def make_ah(env, pd):
    return AH(pd, attr=AHAttr(gr=GlobalRoute(dgid=env.gid, sgid_index=env.gid_index), is_global=1, port_num=1))


def qp_state(qp):
    attr, _ = qp.query(e.IBV_QP_STATE)
    return attr.qp_state


def poll(cq, n=1, timeout=20.0):
    """Up to n completions, waiting at most `timeout` seconds for them."""
    got = []
    end = time.time() + timeout
    while len(got) < n and time.time() < end:
        k, wcs = cq.poll(num_entries=n - len(got))
        if k:
            got.extend(wcs[:k])
        else:
            time.sleep(0.002)
    return got


def drain(cq, quiet=0.3):
    """Every completion that arrives until the CQ stays empty for `quiet` seconds."""
    got = []
    end = time.time() + quiet
    while time.time() < end:
        k, wcs = cq.poll(num_entries=16)
        if k:
            got.extend(wcs[:k])
            end = time.time() + quiet
        else:
            time.sleep(0.005)
    return got


def doorbell(env, qp):
    """Rings the send doorbell without adding a WQE: the rxe provider rejects a misaligned atomic
    before writing anything (EINVAL) and still makes the null post_send that wakes the kernel.
    Returns the provider's error code."""
    wr = SendWR(wr_id=0xdb, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1,
                sg=[SGE(env.scratch.buf, 8, env.scratch.lkey)])
    wr.set_wr_atomic(0, 7, 1)
    try:
        qp.post_send(wr)
    except PyverbsRDMAError as ex:
        return ex.error_code
    raise AssertionError('the provider accepted the doorbell WR')


# ---- RoCEv2 packets from another network namespace --------------------------------------------

ROCE_PORT = 4791
IP_TRANSPARENT = getattr(socket, 'IP_TRANSPARENT', 19)
IP_MTU_DISCOVER = getattr(socket, 'IP_MTU_DISCOVER', 10)
IP_PMTUDISC_DO = getattr(socket, 'IP_PMTUDISC_DO', 2)
IPV6_TRANSPARENT = getattr(socket, 'IPV6_TRANSPARENT', 75)


def bth(opcode, dest_qpn, psn, ack_req=True):
    """Base transport header: no SE, no pad, version 0, P_Key 0xffff."""
    return struct.pack('!BBHII', opcode, 0, 0xffff, dest_qpn & 0xffffff,
                       (0x80000000 if ack_req else 0) | (psn & 0xffffff))


def reth(va, rkey, length):
    return struct.pack('!QII', va, rkey, length)


def aeth(syndrome, msn):
    return struct.pack('!I', (syndrome << 24) | (msn & 0xffffff))


def icrc(ip, udp, transport):
    """The RoCEv2 ICRC (proto/icrc.rs): zlib's CRC-32 over 8 bytes of 0xff (the masked LRH),
    the IPv4 header with TOS, TTL and checksum set to ones (IPv6: traffic class, flow label and
    hop limit), the UDP header with its checksum set to ones, the BTH with its fifth byte set to
    ones, and the rest up to the ICRC."""
    ip, udp, t = bytearray(ip), bytearray(udp), bytearray(transport)
    if ip[0] >> 4 == 6:
        ip[0] |= 0x0f
        ip[1:4] = b'\xff\xff\xff'
        ip[7] = 0xff
    else:
        ip[1] = 0xff
        ip[8] = 0xff
        ip[10:12] = b'\xff\xff'
    udp[6:8] = b'\xff\xff'
    t[4] = 0xff
    return zlib.crc32(b'\xff' * 8 + bytes(ip) + bytes(udp) + bytes(t)) & 0xffffffff


def icrc_known_answers():
    """The known-answer vectors of proto/icrc.rs (a ConnectX-4 Lx CNP, scapy's UC SEND)."""
    h = bytes.fromhex
    cnp = h('45c2003c718c400040119161 0a001101 0a001201'.replace(' ', '')
            + '000012b700280000' + '8100ffff4000011800000000' + '00' * 16)
    got1 = icrc(cnp[:20], cnp[20:28], cnp[28:])
    ip = h('45010040047840004011b4d5c0a80007c0a80007')
    udp = h('c00012b7002caca2')
    t = h('2460ffff000000d300cf1710') + b'F0\x81\x8b\xe2\x895\xd9\x0e\x9a\x95PT\x01\xbe\x88^P\x00\x00'
    got2 = struct.pack('<I', icrc(ip, udp, t))
    ok = got1 == 0x2a00fd82 and got2 == bytes.fromhex('78f353f3')
    return ok, f'cnp {got1:#010x} (want 0x2a00fd82), uc-send {got2.hex()} (want 78f353f3)'


def setns(fd):
    if hasattr(os, 'setns'):
        os.setns(fd, os.CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, 0x40000000) != 0:
        raise OSError(ctypes.get_errno(), 'setns')


def in_netns(netns, make):
    """Runs make() inside network namespace `netns` (/run/netns/NETNS) and returns what it made:
    a socket made there stays there after this thread comes back to its own namespace."""
    own = os.open('/proc/self/ns/net', os.O_RDONLY)
    target = os.open(f'/run/netns/{netns}', os.O_RDONLY)
    try:
        setns(target)
        try:
            return make()
        finally:
            setns(own)
    finally:
        os.close(own)
        os.close(target)


class Sender:
    """A UDP socket in network namespace `netns`, bound to (src, sport), sending RoCEv2 payloads
    to (dst, 4791), over IPv6 when the addresses are IPv6 ones. The kernel builds the IP and
    UDP headers: an unconnected IPv4 socket with DF (IP_PMTUDISC_DO) gets IP ID 0, which the
    ICRC below assumes (the control cases check it)."""

    def __init__(self, netns, src, dst, sport, transparent):
        self.src, self.dst, self.sport = src, dst, sport
        self.v6 = ':' in src

        def make():
            if self.v6:
                s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                if transparent:
                    s.setsockopt(socket.IPPROTO_IPV6, IPV6_TRANSPARENT, 1)
                s.bind((src, sport))
                return s
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            if transparent:  # may send from an address that is not the namespace's
                s.setsockopt(socket.SOL_IP, IP_TRANSPARENT, 1)
            s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
            s.bind((src, sport))
            return s
        self.sock = in_netns(netns, make)

    def packet(self, transport):
        """The UDP payload for BTH..payload: `transport` with its ICRC appended."""
        udp_len = 8 + len(transport) + 4
        if self.v6:
            ip = struct.pack('!IHBB16s16s', 6 << 28, udp_len, 17, 64,
                             socket.inet_pton(socket.AF_INET6, self.src),
                             socket.inet_pton(socket.AF_INET6, self.dst))
        else:
            ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + udp_len, 0, 0x4000, 64, 17, 0,
                             socket.inet_aton(self.src), socket.inet_aton(self.dst))
        udp = struct.pack('!HHHH', self.sport, ROCE_PORT, udp_len, 0)
        return transport + struct.pack('<I', icrc(ip, udp, transport))

    def send(self, transport):
        """Sends BTH..payload with its ICRC appended."""
        pkt = self.packet(transport)
        n = self.sock.sendto(pkt, (self.dst, ROCE_PORT))
        assert n == len(pkt), (n, len(pkt))


def v4_gid(addr):
    """The RoCE v2 GID of an IPv4 address (::ffff:a.b.c.d), as GID() parses it."""
    b = socket.inet_aton(addr)
    return '0000:0000:0000:0000:0000:ffff:' + f'{b[0]:02x}{b[1]:02x}:{b[2]:02x}{b[3]:02x}'


class ForgedPeer:
    """An RC QP of the device (`qp`, in RTS) connected to QP `peer_qpn` at `peer`, an address in
    network namespace `netns` where nothing answers: this process is that peer. `tx` sends its
    packets from there (to `addr`, the device's address); the device's answers arrive at `rx`,
    a socket bound to peer:4791 there, with room for a long reply (a flood fills it, the rest
    is dropped). `rearm` brings the QP back to RTS through RESET with the same attributes."""

    def __init__(self, env, gid_index, netns, addr, peer, peer_qpn, rq_psn, access, mtu=e.IBV_MTU_1024,
                 min_rnr_timer=1, max_dest_rd_atomic=1):
        self.cq = CQ(env.ctx, 16)
        cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(env.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap))
        attr = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
        attr.qp_access_flags = access
        attr.path_mtu = mtu
        attr.dest_qp_num = peer_qpn
        attr.rq_psn = rq_psn
        attr.sq_psn = 0x100
        attr.max_dest_rd_atomic = max_dest_rd_atomic
        attr.max_rd_atomic = 1
        attr.min_rnr_timer = min_rnr_timer
        attr.timeout = 14
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        attr.ah_attr = AHAttr(gr=GlobalRoute(dgid=GID(v4_gid(peer)), sgid_index=gid_index), is_global=1,
                              port_num=1)
        self.attr = attr
        self.qp.to_rts(attr)
        self.tx = Sender(netns, peer, addr, 0xc000 + (os.getpid() & 0xfff), transparent=False)

        def listener():
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, getattr(socket, 'SO_RCVBUFFORCE', 33), 8 << 20)
            sock.bind((peer, ROCE_PORT))
            return sock
        self.rx = in_netns(netns, listener)

    def rearm(self):
        self.qp.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)
        self.qp.to_rts(self.attr)

    def drain(self):
        """Reads and drops whatever `rx` holds; returns how many packets."""
        self.rx.setblocking(False)
        n = 0
        try:
            while True:
                self.rx.recv(4096)
                n += 1
        except BlockingIOError:
            pass
        finally:
            self.rx.setblocking(True)
        return n

    def next_answer(self, timeout):
        """The next packet at `rx` within `timeout` seconds, or None."""
        self.rx.settimeout(timeout)
        try:
            return self.rx.recv(4096)
        except socket.timeout:
            return None


class Counters:
    """The device's hardware counters (a missing one reads as None)."""

    def __init__(self, dev):
        self.dir = f'/sys/class/infiniband/{dev}/ports/1/hw_counters'

    def get(self, name):
        try:
            with open(f'{self.dir}/{name}') as f:
                return int(f.read())
        except OSError:
            return None
