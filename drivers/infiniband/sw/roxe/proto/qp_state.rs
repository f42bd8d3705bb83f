// SPDX-License-Identifier: GPL-2.0

//! The QP state machine (IBA 10.3.1, table 10-3 of modify QP): legal transitions and the required and optional attributes of each, per QP type, plus the value checks of each attribute.
