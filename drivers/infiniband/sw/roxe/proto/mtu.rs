// SPDX-License-Identifier: GPL-2.0

//! InfiniBand path MTU values, their derivation from an Ethernet MTU, and the payload size a
//! QP cuts its messages into ([`Pmtu`]).

/// An InfiniBand MTU (IBA 7.7.1): the payload size of one packet, a power of two.
///
/// The discriminants are the values of the C `enum ib_mtu`, which the verbs ABI carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum IbMtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

/// The most header bytes a payload-carrying RoCEv2 packet puts inside the Ethernet MTU:
/// IPv6 (40) + UDP (8) + BTH (12) + RETH and ImmDt (16 + 4, on RDMA WRITE Only with Immediate,
/// the largest extended-header set that travels with a payload) + ICRC (4) = 84. rxe subtracts
/// 80, which lets a full WRITE-with-immediate packet over IPv6 overflow a link whose MTU sits just
/// above a power of two; we subtract the exact bound instead.
pub const ROCE_MAX_HDR_LEN: u32 = 84;

impl IbMtu {
    /// The MTU in bytes.
    pub const fn bytes(self) -> u32 {
        match self {
            IbMtu::Mtu256 => 256,
            IbMtu::Mtu512 => 512,
            IbMtu::Mtu1024 => 1024,
            IbMtu::Mtu2048 => 2048,
            IbMtu::Mtu4096 => 4096,
        }
    }

    /// The C `enum ib_mtu` value.
    pub const fn as_raw(self) -> u32 {
        self as u32
    }

    /// Parses a C `enum ib_mtu` value (as user space passes in `path_mtu`).
    pub const fn from_raw(raw: u32) -> Option<IbMtu> {
        match raw {
            1 => Some(IbMtu::Mtu256),
            2 => Some(IbMtu::Mtu512),
            3 => Some(IbMtu::Mtu1024),
            4 => Some(IbMtu::Mtu2048),
            5 => Some(IbMtu::Mtu4096),
            _ => None,
        }
    }

    /// The largest IB MTU whose packets fit a link with Ethernet MTU `netdev_mtu`.
    ///
    /// Links too small for even 256-byte payloads still report 256: the port stays usable for
    /// small messages, as on rxe.
    pub const fn for_netdev_mtu(netdev_mtu: u32) -> IbMtu {
        let payload = netdev_mtu.saturating_sub(ROCE_MAX_HDR_LEN);
        if payload >= 4096 {
            IbMtu::Mtu4096
        } else if payload >= 2048 {
            IbMtu::Mtu2048
        } else if payload >= 1024 {
            IbMtu::Mtu1024
        } else if payload >= 512 {
            IbMtu::Mtu512
        } else {
            IbMtu::Mtu256
        }
    }
}

/// The payload size a QP cuts its messages into: every packet of a multi-packet message but the
/// last carries exactly this many bytes (IBA 9.7.2), a power of two from 256 bytes up.
///
/// On the wire it is the path MTU. Between two QPs of one device (the destination GID is the
/// source GID) no packet leaves memory: the requester hands each packet to the responder in a
/// buffer (`net::deliver_local`), and what a packet costs beyond its copies (the requester's
/// planning, the responder's checks, an acknowledgement every few packets) is paid once per
/// [`Pmtu::LOCAL`] bytes instead of once per path MTU. Both QPs of such a connection see a
/// local path, so both cut and check by the same size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pmtu {
    /// log2 of the size in bytes.
    shift: u8,
}

impl Pmtu {
    /// The segment of a loopback connection: 32 KiB, the largest power of two whose packet
    /// still fits the 16-bit length fields of the IP and UDP headers a packet gets when it has
    /// to be queued (the loopback queue carries socket buffers). Per 64 KiB message that is two
    /// packets, each paying the requester's planning and the responder's checks once.
    pub const LOCAL: Pmtu = Pmtu { shift: 15 };

    /// The segment of a path with MTU `mtu`.
    pub const fn of(mtu: IbMtu) -> Pmtu {
        Pmtu {
            shift: mtu.bytes().trailing_zeros() as u8,
        }
    }

    /// The size in bytes.
    pub const fn bytes(self) -> u32 {
        1 << self.shift
    }

    /// log2 of the size in bytes: segmenting is shifting, with no division (by zero or not).
    pub const fn shift(self) -> u32 {
        self.shift as u32
    }

    /// How many 1 KiB units one full packet counts for in the windows that bound what a QP, and
    /// the QPs to one peer, have on the wire at once: 2 at a path MTU of 2048, 4 at 4096. Those
    /// windows were sized in PSNs of 1024 bytes against what the receiving host's socket takes
    /// (`Documentation/performance.md`, "PSN windows"), which is bytes: counted in these units
    /// they bound bytes, so that a jumbo path sends larger packets, not more bytes at once.
    /// Smaller MTUs count 1, as 1024 does (their windows stay 128 PSNs, as rxe's), and so does
    /// [`Pmtu::LOCAL`], whose packets never meet a socket.
    pub const fn wire_units(self) -> u32 {
        1 << self.wire_shift()
    }

    /// This segment, or a smaller one (1024 bytes at least) that still holds `bytes`: the size
    /// of the packets a message of `bytes` is cut into, for [`Pmtu::wire_units`], so that a
    /// message shorter than a jumbo MTU counts what its packets carry, not the MTU. A segment
    /// that counts one unit (loopback's among them) stays as it is.
    pub const fn fitting(self, bytes: u32) -> Pmtu {
        if self.wire_shift() == 0 {
            return self;
        }
        let mut shift = 10;
        // At most two steps: `self` counts units only up to 4096 bytes.
        while shift < self.shift && (1u32 << shift) < bytes {
            shift += 1;
        }
        Pmtu { shift }
    }

    /// log2 of [`Pmtu::wire_units`] (0 to 2): the windows are scaled by shifting, with no
    /// division.
    pub const fn wire_shift(self) -> u32 {
        if self.shift > 10 && self.shift <= 12 {
            self.shift as u32 - 10
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_ethernet_gives_1024() {
        assert_eq!(IbMtu::for_netdev_mtu(1500), IbMtu::Mtu1024);
    }

    #[test]
    fn jumbo_frames_give_4096() {
        assert_eq!(IbMtu::for_netdev_mtu(9000), IbMtu::Mtu4096);
        assert_eq!(
            IbMtu::for_netdev_mtu(4096 + ROCE_MAX_HDR_LEN),
            IbMtu::Mtu4096
        );
        assert_eq!(
            IbMtu::for_netdev_mtu(4096 + ROCE_MAX_HDR_LEN - 1),
            IbMtu::Mtu2048
        );
    }

    #[test]
    fn tiny_links_still_report_256() {
        assert_eq!(IbMtu::for_netdev_mtu(0), IbMtu::Mtu256);
        assert_eq!(IbMtu::for_netdev_mtu(68), IbMtu::Mtu256);
    }

    #[test]
    fn a_full_packet_always_fits_the_link() {
        for mtu in 68..20000u32 {
            let ib = IbMtu::for_netdev_mtu(mtu);
            if mtu >= 256 + ROCE_MAX_HDR_LEN {
                assert!(
                    ib.bytes() + ROCE_MAX_HDR_LEN <= mtu,
                    "netdev mtu {mtu} -> {ib:?}"
                );
            }
        }
    }

    #[test]
    fn segments_are_powers_of_two_from_the_mtu() {
        for raw in 1..=5 {
            let m = IbMtu::from_raw(raw).unwrap();
            assert_eq!(Pmtu::of(m).bytes(), m.bytes());
            assert_eq!(1u32 << Pmtu::of(m).shift(), m.bytes());
        }
        assert_eq!(Pmtu::LOCAL.bytes(), 32768);
        assert!(Pmtu::LOCAL.bytes() > IbMtu::Mtu4096.bytes());
    }

    #[test]
    fn a_queued_local_packet_fits_ip_and_udp_lengths() {
        // IPv4's total length and UDP's length are 16 bits; ROCE_MAX_HDR_LEN counts IPv6's 40
        // header bytes, which IPv6's payload length leaves out.
        assert!(Pmtu::LOCAL.bytes() + ROCE_MAX_HDR_LEN <= u32::from(u16::MAX));
        assert!(2 * Pmtu::LOCAL.bytes() + ROCE_MAX_HDR_LEN > u32::from(u16::MAX));
    }

    #[test]
    fn wire_units_count_kib_from_1024_to_4096() {
        let units = |m| Pmtu::of(m).wire_units();
        assert_eq!(units(IbMtu::Mtu256), 1);
        assert_eq!(units(IbMtu::Mtu512), 1);
        assert_eq!(units(IbMtu::Mtu1024), 1);
        assert_eq!(units(IbMtu::Mtu2048), 2);
        assert_eq!(units(IbMtu::Mtu4096), 4);
        assert_eq!(Pmtu::LOCAL.wire_units(), 1);
    }

    #[test]
    fn short_messages_count_their_packets() {
        let m4k = Pmtu::of(IbMtu::Mtu4096);
        assert_eq!(m4k.fitting(0).wire_units(), 1);
        assert_eq!(m4k.fitting(64).wire_units(), 1);
        assert_eq!(m4k.fitting(1024).wire_units(), 1);
        assert_eq!(m4k.fitting(1025).wire_units(), 2);
        assert_eq!(m4k.fitting(3000).wire_units(), 4);
        assert_eq!(m4k.fitting(1 << 20), m4k);
        assert_eq!(Pmtu::of(IbMtu::Mtu2048).fitting(1 << 20).wire_units(), 2);
        assert_eq!(
            Pmtu::of(IbMtu::Mtu1024).fitting(1 << 20),
            Pmtu::of(IbMtu::Mtu1024)
        );
        assert_eq!(
            Pmtu::of(IbMtu::Mtu256).fitting(1 << 20),
            Pmtu::of(IbMtu::Mtu256)
        );
        assert_eq!(Pmtu::LOCAL.fitting(4096), Pmtu::LOCAL);
    }

    #[test]
    fn raw_round_trip() {
        for raw in 0..10 {
            if let Some(m) = IbMtu::from_raw(raw) {
                assert_eq!(m.as_raw(), raw);
            } else {
                assert!(raw == 0 || raw > 5);
            }
        }
    }
}
