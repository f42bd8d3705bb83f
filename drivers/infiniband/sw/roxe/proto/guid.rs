// SPDX-License-Identifier: GPL-2.0

//! Node and port GUIDs derived from an Ethernet MAC address.

/// The EUI-64 built from a 48-bit MAC (RFC 4291 appendix A): flip the universal/local bit and
/// insert `ff:fe` in the middle. The bytes are in wire order, ready to be used as a `__be64`.
pub const fn eui64_from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_mac() {
        assert_eq!(
            eui64_from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]
        );
    }

    #[test]
    fn universal_bit_flips() {
        assert_eq!(eui64_from_mac([0; 6])[0], 0x02);
        assert_eq!(eui64_from_mac([0x02, 0, 0, 0, 0, 0])[0], 0x00);
    }
}
