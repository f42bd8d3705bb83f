// SPDX-License-Identifier: GPL-2.0

//! The port's performance-management agent (IBA 16.1): the answers to the PerfMgt `Get`
//! requests for ClassPortInfo, PortCounters and PortCountersExtended, built from the device's
//! counts. The RDMA core asks them to fill `ports/N/counters/` in sysfs, and a remote
//! performance manager (`perfquery`) can ask them over QP1.
//!
//! Layout of a PerfMgt MAD (IBA 13.4.3, 16.1.1): the 24-byte common MAD header, 40 reserved
//! bytes, then the attribute's data; every field is big-endian.

use super::bytes::{read, write};

/// Size of a MAD (`struct ib_mad`).
pub const MAD_SIZE: usize = 256;

/// The management class of performance management.
pub const CLASS_PERF_MGMT: u8 = 0x04;

const METHOD_GET: u8 = 0x01;
/// Set in the method of responses (IBA 13.4.5).
const METHOD_RESPONSE: u8 = 0x80;

const ATTR_CLASS_PORT_INFO: u16 = 0x0001;
const ATTR_PORT_COUNTERS: u16 = 0x0012;
const ATTR_PORT_COUNTERS_EXT: u16 = 0x001d;

/// MAD status (IBA 13.4.7): the class does not support the method.
const STATUS_UNSUPPORTED_METHOD: u16 = 0x0008;
/// MAD status: the class does not support this method and attribute combination.
const STATUS_UNSUPPORTED_METHOD_ATTR: u16 = 0x000c;
/// MAD status: a field of the attribute is invalid (here, the PortSelect of another port).
const STATUS_INVALID_FIELD: u16 = 0x001c;

/// ClassPortInfo.CapabilityMask bit (IBA 16.1.2): PortCountersExtended is supported, without
/// the unicast and multicast packet counters (the device does not count those apart).
const CAP_EXT_WIDTH_NOIETF: u16 = 1 << 10;

// Offsets in the MAD.
const OFF_CLASS: usize = 1;
const OFF_METHOD: usize = 3;
const OFF_STATUS: usize = 4;
const OFF_ATTR_ID: usize = 16;
const HEADER_SIZE: usize = 24;
/// Where a PerfMgt attribute's data starts.
const OFF_DATA: usize = 64;

/// The port's counts, as the device keeps them: octets as they are, not yet in IBA's units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounts {
    /// Octets sent.
    pub xmit_octets: u64,
    /// Octets received.
    pub rcv_octets: u64,
    /// Packets sent.
    pub xmit_packets: u64,
    /// Packets received.
    pub rcv_packets: u64,
    /// Received packets dropped as corrupted or malformed (PortRcvErrors).
    pub rcv_errors: u64,
    /// Packets to send that the port discarded (PortXmitDiscards).
    pub xmit_discards: u64,
    /// Transitions of the link to down (LinkDownedCounter).
    pub link_downed: u64,
}

/// What the core is to do with a MAD after [`answer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Not the agent's: pass the MAD on to the agents registered for its class.
    Pass,
    /// The response is in the output MAD: send it (or hand it to the local requester).
    Reply,
}

/// Answers MAD `req` for port `port`, writing the response into `resp`. PerfMgt requests are
/// answered: `Get` of the three attributes with their data, anything else with an error
/// status. Other classes, and responses, are passed on.
pub fn answer(
    port: u8,
    req: &[u8; MAD_SIZE],
    resp: &mut [u8; MAD_SIZE],
    counts: &PortCounts,
) -> Answer {
    let method = req[OFF_METHOD];
    if req[OFF_CLASS] != CLASS_PERF_MGMT || method & METHOD_RESPONSE != 0 {
        return Answer::Pass;
    }
    resp.fill(0);
    resp[..HEADER_SIZE].copy_from_slice(&req[..HEADER_SIZE]);
    resp[OFF_METHOD] = METHOD_GET | METHOD_RESPONSE;
    let status = if method != METHOD_GET {
        // Set (clearing counters) and the trap methods are not supported.
        resp[OFF_METHOD] = method | METHOD_RESPONSE;
        STATUS_UNSUPPORTED_METHOD
    } else {
        let data = &mut resp[OFF_DATA..];
        let port_select = req[OFF_DATA + 1];
        match u16::from_be_bytes(read(req, OFF_ATTR_ID)) {
            ATTR_CLASS_PORT_INFO => {
                class_port_info(data);
                0
            }
            ATTR_PORT_COUNTERS | ATTR_PORT_COUNTERS_EXT if port_select != port => {
                STATUS_INVALID_FIELD
            }
            ATTR_PORT_COUNTERS => {
                port_counters(data, port, counts);
                0
            }
            ATTR_PORT_COUNTERS_EXT => {
                port_counters_ext(data, port, counts);
                0
            }
            _ => STATUS_UNSUPPORTED_METHOD_ATTR,
        }
    };
    write(resp, OFF_STATUS, status.to_be_bytes());
    Answer::Reply
}

/// ClassPortInfo (IBA 13.4.8.1): versions and the capability mask.
fn class_port_info(data: &mut [u8]) {
    data[0] = 1; // BaseVersion
    data[1] = 1; // ClassVersion
    write(data, 2, CAP_EXT_WIDTH_NOIETF.to_be_bytes());
}

/// PortCounters (IBA 16.1.3.5). Every counter stops at all ones instead of wrapping; the data
/// counters count units of four octets. Counters a RoCE port has no source for (symbol and
/// physical-layer errors, VL15, constraint errors, XmitWait) stay 0.
fn port_counters(data: &mut [u8], port: u8, c: &PortCounts) {
    data[1] = port; // PortSelect
    write(data, 7, [sat(c.link_downed, 8) as u8]);
    write(data, 8, (sat(c.rcv_errors, 16) as u16).to_be_bytes());
    write(data, 14, (sat(c.xmit_discards, 16) as u16).to_be_bytes());
    write(data, 24, (sat(c.xmit_octets / 4, 32) as u32).to_be_bytes());
    write(data, 28, (sat(c.rcv_octets / 4, 32) as u32).to_be_bytes());
    write(data, 32, (sat(c.xmit_packets, 32) as u32).to_be_bytes());
    write(data, 36, (sat(c.rcv_packets, 32) as u32).to_be_bytes());
}

/// PortCountersExtended (IBA 16.1.4.11): the data and packet counters in 64 bits; the unicast
/// and multicast ones are reserved (see [`CAP_EXT_WIDTH_NOIETF`]).
fn port_counters_ext(data: &mut [u8], port: u8, c: &PortCounts) {
    data[1] = port; // PortSelect
    write(data, 8, (c.xmit_octets / 4).to_be_bytes());
    write(data, 16, (c.rcv_octets / 4).to_be_bytes());
    write(data, 24, c.xmit_packets.to_be_bytes());
    write(data, 32, c.rcv_packets.to_be_bytes());
}

/// `v` stopped at the largest value of `bits` bits.
const fn sat(v: u64, bits: u32) -> u64 {
    let max = (1u64 << bits) - 1;
    if v > max {
        max
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn be16(buf: &[u8], off: usize) -> u16 {
        u16::from_be_bytes(read(buf, off))
    }

    /// A PerfMgt request as the RDMA core's sysfs code builds it.
    fn request(method: u8, attr: u16, port_select: u8) -> [u8; MAD_SIZE] {
        let mut m = [0u8; MAD_SIZE];
        m[0] = 1;
        m[1] = CLASS_PERF_MGMT;
        m[2] = 1;
        m[3] = method;
        m[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        m[OFF_DATA + 1] = port_select;
        m
    }

    fn ask(req: &[u8; MAD_SIZE], c: &PortCounts) -> (Answer, [u8; MAD_SIZE]) {
        let mut resp = [0xa5u8; MAD_SIZE];
        (answer(1, req, &mut resp, c), resp)
    }

    fn be32_at(b: &[u8], off: usize) -> u32 {
        u32::from_be_bytes(b[off..off + 4].try_into().unwrap())
    }

    fn be64_at(b: &[u8], off: usize) -> u64 {
        u64::from_be_bytes(b[off..off + 8].try_into().unwrap())
    }

    const COUNTS: PortCounts = PortCounts {
        xmit_octets: 4_000_003,
        rcv_octets: 8_000_000,
        xmit_packets: 1000,
        rcv_packets: 2000,
        rcv_errors: 3,
        xmit_discards: 4,
        link_downed: 5,
    };

    #[test]
    fn class_port_info_announces_extended_width_without_ietf() {
        let (a, r) = ask(&request(METHOD_GET, ATTR_CLASS_PORT_INFO, 0), &COUNTS);
        assert_eq!(a, Answer::Reply);
        assert_eq!(r[3], 0x81);
        assert_eq!(be16(&r, OFF_STATUS), 0);
        assert_eq!(&r[OFF_DATA..OFF_DATA + 4], &[1, 1, 0x04, 0x00]);
        // The transaction id comes back.
        assert_eq!(be64_at(&r, 8), 0x1122_3344_5566_7788);
    }

    #[test]
    fn port_counters_in_iba_units_and_offsets() {
        let (a, r) = ask(&request(METHOD_GET, ATTR_PORT_COUNTERS, 1), &COUNTS);
        assert_eq!(a, Answer::Reply);
        assert_eq!(be16(&r, OFF_STATUS), 0);
        let d = &r[OFF_DATA..];
        assert_eq!(d[1], 1);
        assert_eq!(d[7], 5); // LinkDownedCounter
        assert_eq!(be16(d, 8), 3); // PortRcvErrors
        assert_eq!(be16(d, 14), 4); // PortXmitDiscards
        assert_eq!(be32_at(d, 24), 1_000_000); // PortXmitData, octets / 4
        assert_eq!(be32_at(d, 28), 2_000_000); // PortRcvData
        assert_eq!(be32_at(d, 32), 1000);
        assert_eq!(be32_at(d, 36), 2000);
        // No source: zero, and nothing of the 0xa5 fill is left.
        assert_eq!(be16(d, 4), 0);
        assert_eq!(be32_at(d, 40), 0);
        assert!(r[HEADER_SIZE..OFF_DATA].iter().all(|&b| b == 0));
    }

    #[test]
    fn port_counters_stop_at_all_ones() {
        let big = PortCounts {
            xmit_octets: 4 * (1 << 32) + 8,
            rcv_octets: u64::MAX,
            xmit_packets: 1 << 40,
            rcv_packets: u32::MAX as u64,
            rcv_errors: 1 << 16,
            xmit_discards: 0xffff,
            link_downed: 256,
        };
        let (_, r) = ask(&request(METHOD_GET, ATTR_PORT_COUNTERS, 1), &big);
        let d = &r[OFF_DATA..];
        assert_eq!(d[7], 0xff);
        assert_eq!(be16(d, 8), 0xffff);
        assert_eq!(be16(d, 14), 0xffff);
        assert_eq!(be32_at(d, 24), u32::MAX);
        assert_eq!(be32_at(d, 28), u32::MAX);
        assert_eq!(be32_at(d, 32), u32::MAX);
        assert_eq!(be32_at(d, 36), u32::MAX);
    }

    #[test]
    fn port_counters_ext_are_64_bit() {
        let big = PortCounts {
            xmit_octets: 4 * (1 << 40) + 3,
            rcv_octets: 12,
            xmit_packets: 1 << 33,
            rcv_packets: 7,
            ..COUNTS
        };
        let (a, r) = ask(&request(METHOD_GET, ATTR_PORT_COUNTERS_EXT, 1), &big);
        assert_eq!(a, Answer::Reply);
        assert_eq!(be16(&r, OFF_STATUS), 0);
        let d = &r[OFF_DATA..];
        assert_eq!(d[1], 1);
        assert_eq!(be64_at(d, 8), 1 << 40);
        assert_eq!(be64_at(d, 16), 3);
        assert_eq!(be64_at(d, 24), 1 << 33);
        assert_eq!(be64_at(d, 32), 7);
        assert!(d[40..72].iter().all(|&b| b == 0));
    }

    #[test]
    fn other_attributes_methods_and_ports_get_an_error_status() {
        let (a, r) = ask(&request(METHOD_GET, 0x0010, 1), &COUNTS);
        assert_eq!(
            (a, be16(&r, OFF_STATUS)),
            (Answer::Reply, STATUS_UNSUPPORTED_METHOD_ATTR)
        );
        let (a, r) = ask(&request(0x02, ATTR_PORT_COUNTERS, 1), &COUNTS);
        assert_eq!(
            (a, be16(&r, OFF_STATUS)),
            (Answer::Reply, STATUS_UNSUPPORTED_METHOD)
        );
        assert_eq!(r[3], 0x82);
        let (a, r) = ask(&request(METHOD_GET, ATTR_PORT_COUNTERS, 2), &COUNTS);
        assert_eq!(
            (a, be16(&r, OFF_STATUS)),
            (Answer::Reply, STATUS_INVALID_FIELD)
        );
        assert_eq!(be32_at(&r[OFF_DATA..], 24), 0);
    }

    #[test]
    fn other_classes_and_responses_pass() {
        let mut cm = request(METHOD_GET, ATTR_PORT_COUNTERS, 1);
        cm[1] = 0x07; // Communication management: rdma_cm's
        let (a, r) = ask(&cm, &COUNTS);
        assert_eq!(a, Answer::Pass);
        assert!(r.iter().all(|&b| b == 0xa5), "the output is left alone");
        let resp = request(0x81, ATTR_PORT_COUNTERS, 1);
        assert_eq!(ask(&resp, &COUNTS).0, Answer::Pass);
    }
}
