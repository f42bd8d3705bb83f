// SPDX-License-Identifier: GPL-2.0

//! InfiniBand path MTU values and their derivation from an Ethernet MTU.

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
