// SPDX-License-Identifier: GPL-2.0

//! The IBA opcode table (IBA 9.2, table 35): per opcode, the transport, which extension headers follow the BTH, and the packet's place in a message.
