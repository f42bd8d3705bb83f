// SPDX-License-Identifier: GPL-2.0

//! Requester logic (IBA 9.7 and rxe's rxe_req.c, as pure decisions): segmenting a send WQE into packets by path MTU, choosing each packet's opcode, PSN and headers, and the in-flight limits (fence, RDMA READ/atomic credits).
