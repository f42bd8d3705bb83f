// SPDX-License-Identifier: GPL-2.0

//! The invariant CRC (IBA 7.8.1, and annex A17 for RoCEv2): CRC32 over the packet with the variant fields masked.
//!
//! # What is covered
//!
//! The ICRC is the IEEE 802.3 CRC-32 (reflected, polynomial `0xEDB88320`, register preset to all
//! ones, result inverted: the same function as zlib's `crc32`) computed over, in order:
//!
//! 1. eight bytes of `0xFF`, standing for the LRH of native InfiniBand, which RoCEv2 does not
//!    have, masked out entirely;
//! 2. the IP header with the fields routers may change set to all ones: for IPv4 the TOS byte
//!    (DSCP and ECN), the TTL and the header checksum; for IPv6 the traffic class, the flow label
//!    and the hop limit;
//! 3. the UDP header with its checksum set to all ones;
//! 4. the BTH with its fifth byte (FECN, BECN and the six reserved bits, "resv8a") set to all
//!    ones, since switches mark congestion there;
//! 5. everything after the BTH up to the ICRC: extension headers, payload and pad bytes.
//!
//! Rather than hashing the eight `0xFF` bytes on every packet, the computation starts from the
//! CRC register they leave behind, [`MASKED_LRH_CRC`].
//!
//! # Byte order on the wire
//!
//! The 32-bit result goes on the wire least significant byte first (little-endian), like the
//! Ethernet FCS. Verified against a RoCEv2 CNP captured from a ConnectX-4 Lx HCA (published in
//! scapy's `test/contrib/roce.uts`; it is the known-answer test below), whose trailer bytes
//! `82 fd 00 2a` are the CRC `0x2a00fd82` in little-endian order. rxe gets the same bytes on
//! little-endian hosts by storing the CPU-order value; roxe converts explicitly with
//! [`to_wire`] and [`from_wire`], so the order does not depend on the host.
//!
//! # Kernel use
//!
//! The CRC engine is a trait so that the driver can plug in the kernel's `crc32_le` (which may
//! be accelerated); [`SoftCrc32`] is a table-driven implementation for the host and tests.
//! Nothing here allocates: the small headers are copied to the stack to be masked, and the rest
//! streams through [`Icrc::update`], which also suits payload spread over several buffers.

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// A CRC-32 engine with the contract of Linux's `crc32_le`: the reflected CRC-32 with
/// polynomial `0xEDB88320`, continuing from register value `seed` over `data`. The function
/// neither presets nor inverts the register: callers do.
pub trait Crc32 {
    /// Feeds `data` into a CRC register holding `seed` and returns the new register value.
    fn crc32_le(&self, seed: u32, data: &[u8]) -> u32;
}

/// A portable table-driven [`Crc32`] (one table lookup per byte).
#[derive(Clone, Copy, Debug, Default)]
pub struct SoftCrc32;

/// The reflected CRC-32 polynomial (IEEE 802.3).
const CRC32_POLY_REFLECTED: u32 = 0xedb8_8320;

/// `CRC32_TABLE[b]` is the register contribution of byte `b`, built at compile time.
static CRC32_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = byte as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ CRC32_POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        // Compile-time evaluation: an out-of-range index would be a build error.
        table[byte] = crc;
        byte += 1;
    }
    table
};

impl Crc32 for SoftCrc32 {
    fn crc32_le(&self, seed: u32, data: &[u8]) -> u32 {
        data.iter().fold(seed, |crc, &byte| {
            let slot = ((crc ^ u32::from(byte)) & 0xff) as usize;
            // `slot` is below 256, so the lookup always succeeds.
            CRC32_TABLE.get(slot).copied().unwrap_or(0) ^ (crc >> 8)
        })
    }
}

/// The CRC register after presetting it to all ones and feeding the eight `0xFF` bytes of the
/// masked LRH: where the ICRC of every RoCEv2 packet starts.
pub const MASKED_LRH_CRC: u32 = 0xdebb_20e3;

/// The IP header below the UDP header, with its version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpHeader<'a> {
    /// An IPv4 header, options included (20 to 60 bytes, as its IHL says).
    V4(&'a [u8]),
    /// An IPv6 header (40 bytes; RoCEv2 uses no extension headers).
    V6(&'a [u8]),
}

/// Why an ICRC could not be computed: the caller passed headers of the wrong shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IcrcError {
    /// The IP header's length disagrees with its version and IHL, or the version nibble is not
    /// the one claimed.
    BadIpHeader,
    /// The UDP header is not 8 bytes.
    BadUdpHeader,
    /// The transport part is shorter than a BTH.
    ShortBth,
}

const IPV4_MIN_LEN: usize = 20;
const IPV4_MAX_LEN: usize = 60;
const IPV6_LEN: usize = 40;
const UDP_LEN: usize = 8;

/// Sets `len` bytes at `off` to all ones (no-op past the end; callers pass in-range fields).
fn mask(buf: &mut [u8], off: usize, len: usize) {
    if let Some(field) = buf.get_mut(off..off.saturating_add(len)) {
        field.fill(0xff);
    }
}

/// An ICRC in progress: the masked headers are in, more covered bytes may follow.
pub struct Icrc<'e, C: Crc32 + ?Sized> {
    engine: &'e C,
    register: u32,
}

impl<'e, C: Crc32 + ?Sized> Icrc<'e, C> {
    /// Starts an ICRC: feeds the masked LRH, the masked `ip` and `udp_hdr`, then `transport`,
    /// which begins with the BTH (masked) and may continue with any prefix of the rest of the
    /// covered bytes. Feed the remainder with [`Icrc::update`].
    pub fn begin(
        engine: &'e C,
        ip: IpHeader<'_>,
        udp_hdr: &[u8],
        transport: &[u8],
    ) -> Result<Self, IcrcError> {
        let udp: &[u8; UDP_LEN] = udp_hdr.try_into().map_err(|_| IcrcError::BadUdpHeader)?;
        let (bth, after_bth) = transport
            .split_first_chunk::<{ super::opcode::BTH_LEN }>()
            .ok_or(IcrcError::ShortBth)?;

        let mut register = MASKED_LRH_CRC;
        match ip {
            IpHeader::V4(hdr) => {
                let ihl_len = usize::from(hdr.first().copied().unwrap_or(0) & 0x0f) * 4;
                let version = hdr.first().copied().unwrap_or(0) >> 4;
                if !(IPV4_MIN_LEN..=IPV4_MAX_LEN).contains(&hdr.len())
                    || version != 4
                    || ihl_len != hdr.len()
                {
                    return Err(IcrcError::BadIpHeader);
                }
                let mut copy = [0u8; IPV4_MAX_LEN];
                let masked = copy.get_mut(..hdr.len()).ok_or(IcrcError::BadIpHeader)?;
                for (dst, src) in masked.iter_mut().zip(hdr) {
                    *dst = *src;
                }
                mask(masked, 1, 1); // TOS: DSCP and ECN
                mask(masked, 8, 1); // TTL
                mask(masked, 10, 2); // header checksum
                register = engine.crc32_le(register, masked);
            }
            IpHeader::V6(hdr) => {
                let mut copy: [u8; IPV6_LEN] =
                    hdr.try_into().map_err(|_| IcrcError::BadIpHeader)?;
                if copy.first().copied().unwrap_or(0) >> 4 != 6 {
                    return Err(IcrcError::BadIpHeader);
                }
                // The first 32 bits are version (4), traffic class (8) and flow label (20): all
                // but the version are variant.
                if let Some(first) = copy.first_mut() {
                    *first |= 0x0f;
                }
                mask(&mut copy, 1, 3);
                mask(&mut copy, 7, 1); // hop limit
                register = engine.crc32_le(register, &copy);
            }
        }

        let mut udp = *udp;
        mask(&mut udp, 6, 2); // UDP checksum
        register = engine.crc32_le(register, &udp);

        let mut bth = *bth;
        mask(&mut bth, 4, 1); // FECN, BECN, resv6
        register = engine.crc32_le(register, &bth);
        register = engine.crc32_le(register, after_bth);
        Ok(Icrc { engine, register })
    }

    /// Feeds more covered bytes (extension headers, payload, pad), in wire order.
    pub fn update(&mut self, data: &[u8]) {
        self.register = self.engine.crc32_le(self.register, data);
    }

    /// The ICRC value; put it on the wire with [`to_wire`].
    pub fn finish(self) -> u32 {
        !self.register
    }
}

/// The ICRC of a packet whose covered bytes, from the BTH up to but excluding the ICRC, are
/// `transport` in one piece.
pub fn icrc<C: Crc32 + ?Sized>(
    engine: &C,
    ip: IpHeader<'_>,
    udp_hdr: &[u8],
    transport: &[u8],
) -> Result<u32, IcrcError> {
    Icrc::begin(engine, ip, udp_hdr, transport).map(Icrc::finish)
}

/// [`icrc`] over IPv4.
pub fn icrc_ipv4<C: Crc32 + ?Sized>(
    engine: &C,
    ip_hdr: &[u8],
    udp_hdr: &[u8],
    transport: &[u8],
) -> Result<u32, IcrcError> {
    icrc(engine, IpHeader::V4(ip_hdr), udp_hdr, transport)
}

/// [`icrc`] over IPv6.
pub fn icrc_ipv6<C: Crc32 + ?Sized>(
    engine: &C,
    ip_hdr: &[u8],
    udp_hdr: &[u8],
    transport: &[u8],
) -> Result<u32, IcrcError> {
    icrc(engine, IpHeader::V6(ip_hdr), udp_hdr, transport)
}

/// The four trailer bytes for ICRC `value`, in wire order (little-endian, see the module doc).
pub const fn to_wire(value: u32) -> [u8; ICRC_LEN] {
    value.to_le_bytes()
}

/// The ICRC value of four trailer bytes in wire order.
pub const fn from_wire(bytes: [u8; ICRC_LEN]) -> u32 {
    u32::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn hex(s: &str) -> Vec<u8> {
        let s: std::string::String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn crc32_check_value() {
        // The standard check value of CRC-32/ISO-HDLC (zlib's crc32).
        assert_eq!(!SoftCrc32.crc32_le(!0, b"123456789"), 0xcbf4_3926);
        assert_eq!(SoftCrc32.crc32_le(0x1234_5678, b""), 0x1234_5678);
    }

    #[test]
    fn masked_lrh_seed() {
        assert_eq!(SoftCrc32.crc32_le(!0, &[0xff; 8]), MASKED_LRH_CRC);
    }

    /// A CNP captured from a ConnectX-4 Lx, from scapy's `test/contrib/roce.uts` ("RoCE CNP
    /// captured on ConnectX-4 Lx"), Ethernet header removed: IPv4 with TOS 0xc2 (ECN marked),
    /// UDP, BTH with BECN set, 16 reserved bytes, ICRC.
    const CNP_CAPTURE: &str = "45c2 003c 718c 4000 4011 9161 0a00 1101 0a00 1201
                               0000 12b7 0028 0000
                               8100 ffff 4000 0118 0000 0000
                               0000 0000 0000 0000 0000 0000 0000 0000
                               82fd 002a";

    #[test]
    fn known_answer_connectx_cnp() {
        let pkt = hex(CNP_CAPTURE);
        let (ip, rest) = pkt.split_at(20);
        let (udp, rest) = rest.split_at(8);
        let (covered, trailer) = rest.split_at(rest.len() - ICRC_LEN);
        let value = icrc_ipv4(&SoftCrc32, ip, udp, covered).unwrap();
        assert_eq!(value, 0x2a00_fd82);
        assert_eq!(to_wire(value), [0x82, 0xfd, 0x00, 0x2a]);
        assert_eq!(from_wire(trailer.try_into().unwrap()), value);
    }

    /// scapy's example UC SEND Only (same test file, "RoCE layer"), rebuilt byte for byte from
    /// its field values; scapy computes the ICRC `78 f3 53 f3` for it.
    fn scapy_uc_send() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let ip = hex("4501 0040 0478 4000 4011 b4d5 c0a8 0007 c0a8 0007");
        let udp = hex("c000 12b7 002c aca2");
        let mut transport = hex("24 60 ffff 00 0000d3 00 cf1710"); // PSN 13571856
        transport.extend_from_slice(b"F0\x81\x8b\xe2\x895\xd9\x0e\x9a\x95PT\x01\xbe\x88^P\x00\x00");
        (ip, udp, transport)
    }

    #[test]
    fn known_answer_scapy_uc_send() {
        let (ip, udp, transport) = scapy_uc_send();
        let value = icrc_ipv4(&SoftCrc32, &ip, &udp, &transport).unwrap();
        assert_eq!(to_wire(value), [0x78, 0xf3, 0x53, 0xf3]);
    }

    /// An IPv6 RC SEND Only; the expected value was computed independently with Python's
    /// `zlib.crc32` over the masked pseudo-packet.
    fn ipv6_send() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let ip = hex("6234 5678 0020 1140 fe80 0000 0000 0000 0000 0000 0000 0001
             fe80 0000 0000 0000 0000 0000 0000 0002");
        let udp = hex("d1a5 12b7 0020 1234");
        let transport = hex("04 00 ffff 40 000011 80 000123 0102 0304 0506 0708");
        (ip, udp, transport)
    }

    #[test]
    fn known_answer_ipv6() {
        let (ip, udp, transport) = ipv6_send();
        assert_eq!(
            icrc_ipv6(&SoftCrc32, &ip, &udp, &transport),
            Ok(0x398b_2904)
        );
    }

    #[test]
    fn variant_fields_do_not_matter() {
        let (ip, udp, transport) = scapy_uc_send();
        let base = icrc_ipv4(&SoftCrc32, &ip, &udp, &transport).unwrap();
        for (off, val) in [(1, 0x03u8), (8, 1), (10, 0), (11, 0x12)] {
            let mut ip2 = ip.clone();
            ip2[off] = val;
            assert_eq!(
                icrc_ipv4(&SoftCrc32, &ip2, &udp, &transport).unwrap(),
                base,
                "ip byte {off}"
            );
        }
        let mut udp2 = udp.clone();
        udp2[6] = 0;
        udp2[7] = 0;
        assert_eq!(icrc_ipv4(&SoftCrc32, &ip, &udp2, &transport).unwrap(), base);
        let mut t2 = transport.clone();
        t2[4] = 0xc0; // FECN and BECN
        assert_eq!(icrc_ipv4(&SoftCrc32, &ip, &udp, &t2).unwrap(), base);

        let (ip6, udp6, transport6) = ipv6_send();
        let base6 = icrc_ipv6(&SoftCrc32, &ip6, &udp6, &transport6).unwrap();
        let mut v = ip6.clone();
        v[0] = 0x6f;
        v[1] = 0;
        v[2] = 0xab;
        v[3] = 0xcd;
        v[7] = 1;
        assert_eq!(
            icrc_ipv6(&SoftCrc32, &v, &udp6, &transport6).unwrap(),
            base6
        );
    }

    #[test]
    fn invariant_fields_matter() {
        let (ip, udp, transport) = scapy_uc_send();
        let base = icrc_ipv4(&SoftCrc32, &ip, &udp, &transport).unwrap();
        // IPv4: total length, identification, protocol, addresses.
        for off in [3, 5, 9, 12, 19] {
            let mut ip2 = ip.clone();
            ip2[off] ^= 1;
            assert_ne!(
                icrc_ipv4(&SoftCrc32, &ip2, &udp, &transport).unwrap(),
                base,
                "ip byte {off}"
            );
        }
        // UDP ports and length.
        for off in [0, 3, 5] {
            let mut udp2 = udp.clone();
            udp2[off] ^= 1;
            assert_ne!(
                icrc_ipv4(&SoftCrc32, &ip, &udp2, &transport).unwrap(),
                base,
                "udp byte {off}"
            );
        }
        // Every BTH byte except the fifth, and the payload.
        for off in (0..transport.len()).filter(|&o| o != 4) {
            let mut t2 = transport.clone();
            t2[off] ^= 0x10;
            assert_ne!(
                icrc_ipv4(&SoftCrc32, &ip, &udp, &t2).unwrap(),
                base,
                "transport byte {off}"
            );
        }
        let (ip6, udp6, transport6) = ipv6_send();
        let base6 = icrc_ipv6(&SoftCrc32, &ip6, &udp6, &transport6).unwrap();
        for off in [4, 6, 8, 39] {
            let mut v = ip6.clone();
            v[off] ^= 1;
            assert_ne!(
                icrc_ipv6(&SoftCrc32, &v, &udp6, &transport6).unwrap(),
                base6,
                "ipv6 byte {off}"
            );
        }
    }

    #[test]
    fn streaming_matches_one_shot() {
        let (ip, udp, transport) = scapy_uc_send();
        let whole = icrc_ipv4(&SoftCrc32, &ip, &udp, &transport).unwrap();
        for split in 12..=transport.len() {
            let (head, tail) = transport.split_at(split);
            let mut state = Icrc::begin(&SoftCrc32, IpHeader::V4(&ip), &udp, head).unwrap();
            for chunk in tail.chunks(3) {
                state.update(chunk);
            }
            assert_eq!(state.finish(), whole);
        }
        // Through a trait object too, as a driver holding `&dyn Crc32` would call it.
        let engine: &dyn Crc32 = &SoftCrc32;
        assert_eq!(icrc_ipv4(engine, &ip, &udp, &transport).unwrap(), whole);
    }

    #[test]
    fn malformed_headers_are_errors() {
        let (ip, udp, transport) = scapy_uc_send();
        let e = &SoftCrc32;
        assert_eq!(
            icrc_ipv4(e, &ip[..19], &udp, &transport),
            Err(IcrcError::BadIpHeader)
        );
        assert_eq!(
            icrc_ipv4(e, &[], &udp, &transport),
            Err(IcrcError::BadIpHeader)
        );
        let mut v6 = ip.clone();
        v6[0] = 0x65;
        assert_eq!(
            icrc_ipv4(e, &v6, &udp, &transport),
            Err(IcrcError::BadIpHeader)
        );
        let mut ihl = ip.clone();
        ihl[0] = 0x46; // claims 24 bytes
        assert_eq!(
            icrc_ipv4(e, &ihl, &udp, &transport),
            Err(IcrcError::BadIpHeader)
        );
        assert_eq!(
            icrc_ipv6(e, &ip, &udp, &transport),
            Err(IcrcError::BadIpHeader)
        );
        assert_eq!(
            icrc_ipv4(e, &ip, &udp[..7], &transport),
            Err(IcrcError::BadUdpHeader)
        );
        assert_eq!(
            icrc_ipv4(e, &ip, &udp, &transport[..11]),
            Err(IcrcError::ShortBth)
        );
        // IPv4 options are covered as they are.
        let mut opts = ip.clone();
        opts[0] = 0x46;
        opts.extend_from_slice(&[1, 1, 1, 0]);
        assert!(icrc_ipv4(e, &opts, &udp, &transport).is_ok());
    }
}
