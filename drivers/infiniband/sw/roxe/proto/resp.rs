// SPDX-License-Identifier: GPL-2.0

//! Responder logic (IBA 9.7 and 9.8, rxe's rxe_resp.c, as pure decisions): PSN and opcode-sequence checks, access checks of RDMA requests, duplicate detection with the responder resources cache, and the ACK or NAK each request gets.
