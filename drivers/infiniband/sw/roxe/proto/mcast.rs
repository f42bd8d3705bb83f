// SPDX-License-Identifier: GPL-2.0

//! Multicast GIDs of RoCEv2 (IBA A17.4.5.2): a multicast group's GID is an IPv6 multicast
//! address (`ff00::/8`) or an IPv4-mapped IPv4 multicast address (`::ffff:224.0.0.0/100`), and
//! its packets travel to the Ethernet multicast address IP maps it to (RFC 1112 section 6.4
//! for IPv4, RFC 2464 section 7 for IPv6). Packets for a group carry destination QPN 0xFFFFFF.

/// The destination QPN of multicast packets (IBA 10.5.2.1).
pub const MULTICAST_QPN: u32 = 0x00ff_ffff;

/// The IPv4 address of an IPv4-mapped GID, if it is one.
fn mapped_v4(gid: &[u8; 16]) -> Option<[u8; 4]> {
    let (prefix, v4) = gid.split_at(12);
    if prefix == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
        let mut a = [0u8; 4];
        a.copy_from_slice(v4);
        Some(a)
    } else {
        None
    }
}

/// Whether `gid` names a multicast group.
pub fn is_multicast_gid(gid: &[u8; 16]) -> bool {
    match mapped_v4(gid) {
        Some(a) => a[0] & 0xf0 == 0xe0,
        None => gid[0] == 0xff,
    }
}

/// The Ethernet address a multicast group's packets go to; `None` if `gid` is not multicast.
pub fn mac_for_group(gid: &[u8; 16]) -> Option<[u8; 6]> {
    if !is_multicast_gid(gid) {
        return None;
    }
    Some(match mapped_v4(gid) {
        // 01:00:5e and the low 23 bits of the group address.
        Some(a) => [0x01, 0x00, 0x5e, a[1] & 0x7f, a[2], a[3]],
        // 33:33 and the low 32 bits.
        None => [0x33, 0x33, gid[12], gid[13], gid[14], gid[15]],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: [u8; 4]) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&a);
        g
    }

    #[test]
    fn ipv4_groups_map_low_23_bits() {
        assert_eq!(
            mac_for_group(&v4([239, 129, 2, 3])),
            Some([0x01, 0x00, 0x5e, 0x01, 2, 3])
        );
        assert_eq!(
            mac_for_group(&v4([224, 0, 0, 251])),
            Some([0x01, 0x00, 0x5e, 0, 0, 251])
        );
        assert_eq!(mac_for_group(&v4([192, 168, 77, 1])), None);
        assert!(!is_multicast_gid(&v4([240, 0, 0, 1])));
    }

    #[test]
    fn ipv6_groups_map_low_32_bits() {
        let mut g = [0u8; 16];
        g[0] = 0xff;
        g[1] = 0x0e;
        g[12..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(
            mac_for_group(&g),
            Some([0x33, 0x33, 0xde, 0xad, 0xbe, 0xef])
        );
        let mut unicast = g;
        unicast[0] = 0xfd;
        assert_eq!(mac_for_group(&unicast), None);
    }
}
