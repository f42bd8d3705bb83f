// SPDX-License-Identifier: GPL-2.0
/*
 * A kernel verbs consumer that checks what roxe hands kernel ULPs in struct ib_wc.
 *
 * ib_wc.qp must name the QP whose work request completed, as it was when the work request was
 * posted. A driver that looks the CQE's QP number up again at poll time hands out another QP once
 * that number has been reused. The check: a receive on QP A is flushed (its completion waits in
 * the CQ, unpolled), A is destroyed, QPs are created and destroyed until one (B) gets A's number
 * again, and then the completion is polled. It must carry A's wr_id and flush status, and its qp
 * must not be B. A first completion polled while its QP lives must name that QP.
 *
 * Fast registration, as NVMe over Fabrics and NFS over RDMA use it: two RC QPs in loopback
 * through the device's RoCE v2 IPv4 GID; A registers two pages of kernel memory with
 * ib_map_mr_sg and an IB_WR_REG_MR, B writes them by RDMA WRITE through the new R_Key and reads
 * them back by RDMA READ, A invalidates the MR (IB_WR_LOCAL_INV), and a WRITE through the R_Key
 * then fails with a remote access error, leaving the memory as it was. Then A maps the pages again,
 * sets the MR's IOVA anew before the IB_WR_REG_MR (as NFS's client does, with the RPC's XID in
 * its upper 32 bits), and B's WRITE must land through the new IOVA and be refused at the mapped
 * one. On the debug kernel this runs the fast-registration MR's page lists and their locks under
 * lockdep.
 *
 * Deregistration under a flood: each round, A fast-registers two fresh pages, a work item on
 * another CPU posts a burst of RDMA WRITEs from B through the R_Key, and once the first bytes
 * have landed A deregisters the MR and at once fills the pages with a poison byte (on a KASAN
 * kernel every other round frees them instead). ib_dereg_mr must return only when no copy can
 * touch the pages: the poison must stay whole. The check counts the rounds in which WRITEs
 * were refused after the deregistration (it ran mid-flood) and fails if none were.
 *
 * The result is the module's load: insmod fails (EIO) when a check fails, and the kernel log
 * says which (lines "roxe_kverbs_check: PASS|FAIL <name> ...").
 *
 *   insmod roxe_kverbs_check.ko dev=roxe0
 */

#include <linux/module.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/workqueue.h>
#include <linux/random.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <net/ipv6.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

static char *dev = "roxe0";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "RDMA device to check");

/* The QP number space is cyclic; a little more than one turn of it must bring a number back. */
static unsigned int max_creates = 200000;
module_param(max_creates, uint, 0444);
MODULE_PARM_DESC(max_creates, "Most QPs to create while waiting for a QP number to come back");

/*
 * Creators working at once: a QP's destruction waits for an RCU grace period, which under QEMU
 * takes milliseconds (tens of them on a debug kernel); concurrent waiters share grace periods,
 * so the hunt goes as fast as the CPUs create and destroy QPs only with many waiters.
 */
#define CREATORS 256

#define WR_ID_LIVE 0x11110001ULL
#define WR_ID_GONE 0x22220002ULL

static int result = -ENODEV;
static u8 buf[256];

static void verdict(bool ok, const char *name, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_info("roxe_kverbs_check: %s %s %pV\n", ok ? "PASS" : "FAIL", name, &vaf);
	va_end(args);
	if (!ok)
		result = -EIO;
}

static struct ib_qp *create_ud_qp(struct ib_pd *pd, struct ib_cq *cq)
{
	struct ib_qp_init_attr init = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IB_QPT_UD,
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};

	return ib_create_qp(pd, &init);
}

/* Posts one receive on a fresh UD QP and moves the QP to the error state, which flushes it. */
static int flushed_recv(struct ib_pd *pd, struct ib_qp *qp, u64 wr_id)
{
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qkey = 0x11111111,
	};
	struct ib_sge sge = {
		.addr = ib_dma_map_single(pd->device, buf, sizeof(buf), DMA_FROM_DEVICE),
		.length = sizeof(buf),
		.lkey = pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 };
	const struct ib_recv_wr *bad;
	int ret;

	ret = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY);
	if (ret)
		return ret;
	ret = ib_post_recv(qp, &wr, &bad);
	if (ret)
		return ret;
	attr.qp_state = IB_QPS_ERR;
	ret = ib_modify_qp(qp, &attr, IB_QP_STATE);
	/* A flush may finish in the driver's work; give it time before looking. */
	msleep(200);
	return ret;
}

/* The QP number hunt: creators make QPs until one gets the number wanted, and keep that one. */
static struct {
	struct ib_pd *pd;
	struct ib_cq *cq;
	u32 qpn;
	atomic_t remaining;
	atomic_t created;
	atomic_t running;
	struct ib_qp *found;
	long err;
	struct work_struct work[CREATORS];
} hunt;

static void hunt_loop(void);

static void hunt_work(struct work_struct *work)
{
	hunt_loop();
	atomic_dec(&hunt.running);
}

static void hunt_loop(void)
{
	struct ib_qp *q;

	while (!READ_ONCE(hunt.found) && !READ_ONCE(hunt.err) && atomic_dec_return(&hunt.remaining) >= 0) {
		q = create_ud_qp(hunt.pd, hunt.cq);
		if (IS_ERR(q)) {
			WRITE_ONCE(hunt.err, PTR_ERR(q));
			return;
		}
		if (atomic_inc_return(&hunt.created) % 16384 == 0)
			pr_info("roxe_kverbs_check: %d QPs created\n", atomic_read(&hunt.created));
		if (q->qp_num == hunt.qpn) {
			WRITE_ONCE(hunt.found, q);
			return;
		}
		ib_destroy_qp(q);
		cond_resched();
	}
}

/* Creates QPs until one gets QP number `qpn`, and returns it (NULL if none did). */
static struct ib_qp *qp_with_number(struct ib_pd *pd, struct ib_cq *cq, u32 qpn)
{
	struct workqueue_struct *wq;
	int i;

	hunt.pd = pd;
	hunt.cq = cq;
	hunt.qpn = qpn;
	hunt.found = NULL;
	hunt.err = 0;
	atomic_set(&hunt.remaining, max_creates);
	atomic_set(&hunt.created, 0);
	atomic_set(&hunt.running, CREATORS);
	wq = alloc_workqueue("roxe_kverbs_check", WQ_UNBOUND, CREATORS);
	if (!wq) {
		hunt.err = -ENOMEM;
		return NULL;
	}
	for (i = 0; i < CREATORS; i++) {
		INIT_WORK(&hunt.work[i], hunt_work);
		queue_work(wq, &hunt.work[i]);
	}
	/*
	 * A sleep the hung-task detector does not count: on a debug kernel under QEMU the hunt
	 * takes minutes.
	 */
	while (atomic_read(&hunt.running))
		msleep_interruptible(500);
	destroy_workqueue(wq);
	return hunt.found;
}


/* Polls one completion, for up to five seconds. */
static int poll_one(struct ib_cq *cq, struct ib_wc *wc)
{
	int i, n;

	for (i = 0; i < 2500; i++) {
		n = ib_poll_cq(cq, 1, wc);
		if (n)
			return n;
		usleep_range(1000, 3000);
	}
	return 0;
}

/* Brings RC QP qp to RTS, connected to QP dest through GID attribute gid (its own device). */
static int connect_rc(struct ib_qp *qp, u32 dest, const struct ib_gid_attr *gid)
{
	struct ib_qp_attr a = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ,
	};
	union ib_gid dgid = gid->gid;
	int ret;

	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 0x100;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.type = rdma_ah_find_type(qp->device, 1);
	rdma_ah_set_port_num(&a.ah_attr, 1);
	rdma_ah_set_grh(&a.ah_attr, &dgid, 0, gid->index, 64, 0);
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0x100;
	a.max_rd_atomic = 1;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_TIMEOUT | IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
			    IB_QP_SQ_PSN | IB_QP_MAX_QP_RD_ATOMIC);
}

/* Takes an RC QP back to RESET and connects it again. */
static int reset_rc(struct ib_qp *qp, u32 dest, const struct ib_gid_attr *gid)
{
	struct ib_qp_attr a = { .qp_state = IB_QPS_RESET };
	int ret = ib_modify_qp(qp, &a, IB_QP_STATE);

	return ret ? ret : connect_rc(qp, dest, gid);
}

/* The device's RoCE v2 GID of an IPv4 address (the caller puts it), or an error pointer. */
static const struct ib_gid_attr *roce_v2_ipv4_gid(struct ib_device *ibdev)
{
	const struct ib_gid_attr *attr;
	int i;

	for (i = 0; i < ibdev->port_data[1].immutable.gid_tbl_len; i++) {
		attr = rdma_get_gid_attr(ibdev, 1, i);
		if (IS_ERR(attr))
			continue;
		if (attr->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP &&
		    ipv6_addr_v4mapped((const struct in6_addr *)attr->gid.raw))
			return attr;
		rdma_put_gid_attr(attr);
	}
	return ERR_PTR(-ENOENT);
}

static struct ib_qp *create_rc_qp_depth(struct ib_pd *pd, struct ib_cq *cq, u32 depth)
{
	struct ib_qp_init_attr init = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IB_QPT_RC,
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.cap = { .max_send_wr = depth, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};

	return ib_create_qp(pd, &init);
}

static struct ib_qp *create_rc_qp(struct ib_pd *pd, struct ib_cq *cq)
{
	return create_rc_qp_depth(pd, cq, 4);
}

/* Destroys what a check's two RC QPs and their CQs left set up (each may be NULL or an error). */
static void put_rc_pair(struct ib_qp *a, struct ib_qp *b, struct ib_cq *cq_a, struct ib_cq *cq_b)
{
	if (!IS_ERR_OR_NULL(b))
		ib_destroy_qp(b);
	if (!IS_ERR_OR_NULL(a))
		ib_destroy_qp(a);
	if (!IS_ERR_OR_NULL(cq_b))
		ib_free_cq(cq_b);
	if (!IS_ERR_OR_NULL(cq_a))
		ib_free_cq(cq_a);
}

/* Posts wr on qp and polls its completion from cq: the status, or -1 if none came. */
static int post_and_poll(struct ib_qp *qp, struct ib_cq *cq, const struct ib_send_wr *wr)
{
	const struct ib_send_wr *bad;
	struct ib_wc wc;

	if (ib_post_send(qp, wr, &bad))
		return -1;
	if (poll_one(cq, &wc) != 1)
		return -1;
	return wc.status;
}

#define FR_LEN (2 * PAGE_SIZE)

static void check_fast_reg(struct ib_device *ibdev, struct ib_pd *pd)
{
	const struct ib_gid_attr *gid;
	struct ib_cq *cq_a = NULL, *cq_b = NULL;
	struct ib_qp *a = NULL, *b = NULL;
	struct ib_mr *mr = NULL;
	struct scatterlist sg[2];
	u8 *target = NULL, *src = NULL, *back = NULL;
	struct ib_sge sge;
	struct ib_rdma_wr rdma;
	struct ib_reg_wr reg;
	struct ib_send_wr inv;
	u64 mapped_iova;
	u32 rkey;
	int n, st;

	gid = roce_v2_ipv4_gid(ibdev);
	if (IS_ERR(gid)) {
		verdict(false, "fast-reg-setup", "no RoCE v2 IPv4 GID");
		return;
	}
	target = kzalloc(FR_LEN, GFP_KERNEL);
	src = kmalloc(FR_LEN, GFP_KERNEL);
	back = kzalloc(FR_LEN, GFP_KERNEL);
	cq_a = ib_alloc_cq(ibdev, NULL, 8, 0, IB_POLL_DIRECT);
	cq_b = ib_alloc_cq(ibdev, NULL, 8, 0, IB_POLL_DIRECT);
	if (!target || !src || !back || IS_ERR(cq_a) || IS_ERR(cq_b)) {
		verdict(false, "fast-reg-setup", "no memory or CQ");
		goto out;
	}
	get_random_bytes(src, FR_LEN);
	a = create_rc_qp(pd, cq_a);
	b = IS_ERR(a) ? ERR_PTR(-EINVAL) : create_rc_qp(pd, cq_b);
	if (IS_ERR(a) || IS_ERR(b)) {
		verdict(false, "fast-reg-setup", "create RC QPs: %ld %ld", PTR_ERR(a), PTR_ERR(b));
		goto out;
	}
	n = connect_rc(a, b->qp_num, gid);
	if (!n)
		n = connect_rc(b, a->qp_num, gid);
	if (n) {
		verdict(false, "fast-reg-setup", "connect: %d", n);
		goto out;
	}
	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 2);
	if (IS_ERR(mr)) {
		verdict(false, "fast-reg-setup", "ib_alloc_mr: %ld", PTR_ERR(mr));
		mr = NULL;
		goto out;
	}
	/* Two page-aligned pieces of the buffer: kzalloc of two pages is page-aligned. */
	sg_init_table(sg, 2);
	sg_set_buf(&sg[0], target, PAGE_SIZE);
	sg_set_buf(&sg[1], target + PAGE_SIZE, PAGE_SIZE);
	if (ib_dma_map_sg(ibdev, sg, 2, DMA_BIDIRECTIONAL) != 2) {
		verdict(false, "fast-reg-setup", "ib_dma_map_sg");
		goto out;
	}
	n = ib_map_mr_sg(mr, sg, 2, NULL, PAGE_SIZE);
	verdict(n == 2, "fast-reg-map", "ib_map_mr_sg mapped %d of 2", n);
	if (n != 2)
		goto out_unmap;
	rkey = ib_inc_rkey(mr->rkey);
	ib_update_fast_reg_key(mr, rkey & 0xff);
	memset(&reg, 0, sizeof(reg));
	reg.wr.opcode = IB_WR_REG_MR;
	reg.wr.send_flags = IB_SEND_SIGNALED;
	reg.mr = mr;
	reg.key = mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
	st = post_and_poll(a, cq_a, &reg.wr);
	verdict(st == IB_WC_SUCCESS, "fast-reg-reg-mr", "status %d", st);
	if (st != IB_WC_SUCCESS)
		goto out_unmap;

	/* B writes both pages through the new R_Key, then reads them back. */
	sge.addr = ib_dma_map_single(ibdev, src, FR_LEN, DMA_TO_DEVICE);
	sge.length = FR_LEN;
	sge.lkey = pd->local_dma_lkey;
	memset(&rdma, 0, sizeof(rdma));
	rdma.wr.opcode = IB_WR_RDMA_WRITE;
	rdma.wr.send_flags = IB_SEND_SIGNALED;
	rdma.wr.sg_list = &sge;
	rdma.wr.num_sge = 1;
	rdma.remote_addr = mr->iova;
	rdma.rkey = mr->rkey;
	st = post_and_poll(b, cq_b, &rdma.wr);
	verdict(st == IB_WC_SUCCESS && !memcmp(target, src, FR_LEN), "fast-reg-write",
		"status %d, %s", st, memcmp(target, src, FR_LEN) ? "memory differs" : "memory matches");
	sge.addr = ib_dma_map_single(ibdev, back, FR_LEN, DMA_FROM_DEVICE);
	rdma.wr.opcode = IB_WR_RDMA_READ;
	st = post_and_poll(b, cq_b, &rdma.wr);
	verdict(st == IB_WC_SUCCESS && !memcmp(back, src, FR_LEN), "fast-reg-read",
		"status %d, %s", st, memcmp(back, src, FR_LEN) ? "bytes differ" : "bytes match");

	/* A invalidates it; a WRITE through the old R_Key then fails and changes nothing. */
	memset(&inv, 0, sizeof(inv));
	inv.opcode = IB_WR_LOCAL_INV;
	inv.send_flags = IB_SEND_SIGNALED;
	inv.ex.invalidate_rkey = mr->rkey;
	st = post_and_poll(a, cq_a, &inv);
	verdict(st == IB_WC_SUCCESS, "fast-reg-local-inv", "status %d", st);
	memset(target, 0, FR_LEN);
	sge.addr = ib_dma_map_single(ibdev, src, FR_LEN, DMA_TO_DEVICE);
	rdma.wr.opcode = IB_WR_RDMA_WRITE;
	st = post_and_poll(b, cq_b, &rdma.wr);
	verdict(st == IB_WC_REM_ACCESS_ERR && !memchr_inv(target, 0, FR_LEN), "fast-reg-write-after-inv",
		"status %d (want %d), memory %s", st, IB_WC_REM_ACCESS_ERR,
		memchr_inv(target, 0, FR_LEN) ? "changed" : "unchanged");

	/*
	 * Registered again at an IOVA of the consumer's choosing: NFS's client (frwr_map) puts the
	 * RPC's XID in the upper 32 bits of the IOVA that ib_map_mr_sg set, then posts the REG_MR.
	 * The MR answers at the IOVA the REG_MR carried, and no longer at the mapped address. The
	 * refused WRITE above left both QPs in error: they start over from RESET.
	 */
	n = reset_rc(a, b->qp_num, gid);
	if (!n)
		n = reset_rc(b, a->qp_num, gid);
	if (n) {
		verdict(false, "fast-reg-new-iova", "reconnect: %d", n);
		goto out_unmap;
	}
	n = ib_map_mr_sg(mr, sg, 2, NULL, PAGE_SIZE);
	if (n != 2) {
		verdict(false, "fast-reg-new-iova", "ib_map_mr_sg mapped %d of 2", n);
		goto out_unmap;
	}
	mapped_iova = mr->iova;
	mr->iova = (mr->iova & 0xffffffffULL) | ((u64)0x5eed0001 << 32);
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey) & 0xff);
	reg.key = mr->rkey;
	st = post_and_poll(a, cq_a, &reg.wr);
	verdict(st == IB_WC_SUCCESS, "fast-reg-new-iova-reg-mr", "status %d", st);
	if (st != IB_WC_SUCCESS)
		goto out_unmap;
	memset(target, 0, FR_LEN);
	sge.addr = ib_dma_map_single(ibdev, src, FR_LEN, DMA_TO_DEVICE);
	rdma.remote_addr = mr->iova;
	rdma.rkey = mr->rkey;
	st = post_and_poll(b, cq_b, &rdma.wr);
	verdict(st == IB_WC_SUCCESS && !memcmp(target, src, FR_LEN), "fast-reg-new-iova-write",
		"at 0x%llx: status %d, %s", mr->iova, st,
		memcmp(target, src, FR_LEN) ? "memory differs" : "memory matches");
	memset(target, 0, FR_LEN);
	rdma.remote_addr = mapped_iova;
	st = post_and_poll(b, cq_b, &rdma.wr);
	verdict(st == IB_WC_REM_ACCESS_ERR && !memchr_inv(target, 0, FR_LEN), "fast-reg-mapped-iova-refused",
		"at 0x%llx: status %d (want %d), memory %s", mapped_iova, st, IB_WC_REM_ACCESS_ERR,
		memchr_inv(target, 0, FR_LEN) ? "changed" : "unchanged");
out_unmap:
	ib_dma_unmap_sg(ibdev, sg, 2, DMA_BIDIRECTIONAL);
out:
	if (mr)
		ib_dereg_mr(mr);
	put_rc_pair(a, b, cq_a, cq_b);
	kfree(back);
	kfree(src);
	kfree(target);
	rdma_put_gid_attr(gid);
}

#define DR_ROUNDS 200
#define DR_WRITES 32
#define DR_POISON 0x6b

/* B's burst of WRITEs, posted from a work item on another CPU than the deregistering one. */
struct dr_flood {
	struct work_struct work;
	struct ib_qp *qp;
	struct ib_rdma_wr wr[DR_WRITES];
	struct ib_sge sge;
	int err;
};

static void dr_flood_post(struct work_struct *work)
{
	struct dr_flood *f = container_of(work, struct dr_flood, work);
	const struct ib_send_wr *bad;

	f->err = ib_post_send(f->qp, &f->wr[0].wr, &bad);
}

/* Fast-registers the two pages at target on mr through QP a: 0 or an error. */
static int dr_register(struct ib_device *ibdev, struct ib_qp *a, struct ib_cq *cq_a,
		       struct ib_mr *mr, struct scatterlist *sg, void *target)
{
	struct ib_reg_wr reg = {};

	sg_init_table(sg, 2);
	sg_set_buf(&sg[0], target, PAGE_SIZE);
	sg_set_buf(&sg[1], target + PAGE_SIZE, PAGE_SIZE);
	if (ib_dma_map_sg(ibdev, sg, 2, DMA_BIDIRECTIONAL) != 2)
		return -ENOMEM;
	if (ib_map_mr_sg(mr, sg, 2, NULL, PAGE_SIZE) != 2)
		return -EINVAL;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey) & 0xff);
	reg.wr.opcode = IB_WR_REG_MR;
	reg.wr.send_flags = IB_SEND_SIGNALED;
	reg.mr = mr;
	reg.key = mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	return post_and_poll(a, cq_a, &reg.wr) == IB_WC_SUCCESS ? 0 : -EIO;
}

/* One round; returns 1 if bytes landed after ib_dereg_mr returned, 0 if not, or an error. */
static int dr_round(struct ib_device *ibdev, struct ib_pd *pd, struct ib_qp *a, struct ib_cq *cq_a,
		    struct dr_flood *f, struct ib_cq *cq_b, int round, int *refused, int *succeeded)
{
	bool free_at_once = IS_ENABLED(CONFIG_KASAN) && (round & 1);
	struct scatterlist sg[2];
	struct page *pages;
	struct ib_mr *mr;
	unsigned long deadline;
	struct ib_wc wc;
	void *target;
	int i, got = 0, hit = 0, err;
	int cpu = cpumask_next(raw_smp_processor_id(), cpu_online_mask);

	if (cpu >= nr_cpu_ids)
		cpu = cpumask_first(cpu_online_mask);
	pages = alloc_pages(GFP_KERNEL | __GFP_ZERO, 1);
	if (!pages)
		return -ENOMEM;
	target = page_address(pages);
	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 2);
	if (IS_ERR(mr)) {
		__free_pages(pages, 1);
		return PTR_ERR(mr);
	}
	err = dr_register(ibdev, a, cq_a, mr, sg, target);
	if (err) {
		ib_dereg_mr(mr);
		__free_pages(pages, 1);
		return err;
	}
	for (i = 0; i < DR_WRITES; i++) {
		f->wr[i].remote_addr = mr->iova;
		f->wr[i].rkey = mr->rkey;
	}
	INIT_WORK(&f->work, dr_flood_post);
	queue_work_on(cpu, system_highpri_wq, &f->work);
	/*
	 * Once the first bytes have landed (the flood is being copied in): deregister, and the pages
	 * are the consumer's again at once.
	 */
	deadline = jiffies + HZ;
	while (READ_ONCE(*(u8 *)target) != 0x5a && time_before(jiffies, deadline))
		cpu_relax();
	ib_dereg_mr(mr);
	if (free_at_once)
		__free_pages(pages, 1);
	else
		memset(target, DR_POISON, 2 * PAGE_SIZE);
	flush_work(&f->work);
	while (!f->err && got < DR_WRITES && poll_one(cq_b, &wc) == 1) {
		got++;
		*succeeded += wc.status == IB_WC_SUCCESS;
		*refused += wc.status == IB_WC_REM_ACCESS_ERR;
	}
	if (!free_at_once) {
		usleep_range(2000, 3000);
		hit = memchr_inv(target, DR_POISON, 2 * PAGE_SIZE) != NULL;
		__free_pages(pages, 1);
	}
	ib_dma_unmap_sg(ibdev, sg, 2, DMA_BIDIRECTIONAL);
	return f->err ? f->err : hit;
}

static void check_dereg_under_writes(struct ib_device *ibdev, struct ib_pd *pd)
{
	const struct ib_gid_attr *gid;
	struct ib_cq *cq_a = NULL, *cq_b = NULL;
	struct ib_qp *a = NULL, *b = NULL;
	struct dr_flood *f = NULL;
	u8 *src = NULL;
	int i, n, hits = 0, mid_flood = 0, rounds = 0, succeeded = 0;

	gid = roce_v2_ipv4_gid(ibdev);
	if (IS_ERR(gid)) {
		verdict(false, "dereg-under-writes", "no RoCE v2 IPv4 GID");
		return;
	}
	src = kmalloc(2 * PAGE_SIZE, GFP_KERNEL);
	f = kzalloc(sizeof(*f), GFP_KERNEL);
	cq_a = ib_alloc_cq(ibdev, NULL, 8, 0, IB_POLL_DIRECT);
	cq_b = ib_alloc_cq(ibdev, NULL, 2 * DR_WRITES, 0, IB_POLL_DIRECT);
	if (!src || !f || IS_ERR(cq_a) || IS_ERR(cq_b)) {
		verdict(false, "dereg-under-writes", "no memory or CQ");
		goto out;
	}
	memset(src, 0x5a, 2 * PAGE_SIZE);
	a = create_rc_qp(pd, cq_a);
	b = IS_ERR(a) ? ERR_PTR(-EINVAL) : create_rc_qp_depth(pd, cq_b, DR_WRITES);
	if (IS_ERR(a) || IS_ERR(b)) {
		verdict(false, "dereg-under-writes", "create RC QPs: %ld %ld", PTR_ERR(a), PTR_ERR(b));
		goto out;
	}
	f->qp = b;
	f->sge.addr = ib_dma_map_single(ibdev, src, 2 * PAGE_SIZE, DMA_TO_DEVICE);
	f->sge.length = 2 * PAGE_SIZE;
	f->sge.lkey = pd->local_dma_lkey;
	for (i = 0; i < DR_WRITES; i++) {
		f->wr[i].wr.opcode = IB_WR_RDMA_WRITE;
		f->wr[i].wr.sg_list = &f->sge;
		f->wr[i].wr.num_sge = 1;
		f->wr[i].wr.next = i + 1 < DR_WRITES ? &f->wr[i + 1].wr : NULL;
	}
	for (rounds = 0; rounds < DR_ROUNDS; rounds++) {
		int refused = 0;

		n = reset_rc(a, b->qp_num, gid);
		if (!n)
			n = reset_rc(b, a->qp_num, gid);
		if (!n)
			n = dr_round(ibdev, pd, a, cq_a, f, cq_b, rounds, &refused, &succeeded);
		if (n < 0) {
			verdict(false, "dereg-under-writes", "round %d: error %d", rounds, n);
			goto out;
		}
		hits += n;
		mid_flood += refused > 0;
	}
	verdict(!hits && mid_flood && succeeded, "dereg-under-writes",
		"%d rounds: %d with bytes written after ib_dereg_mr returned, %d deregistered mid-flood (WRITEs refused after it), %d WRITEs landed before",
		rounds, hits, mid_flood, succeeded);
out:
	put_rc_pair(a, b, cq_a, cq_b);
	kfree(f);
	kfree(src);
	rdma_put_gid_attr(gid);
}

/* A's SEND of 64 bytes at buf (local_dma_lkey) into a receive of B: A's completion status. */
static int send_from(struct ib_pd *pd, struct ib_qp *a, struct ib_cq *cq_a, struct ib_qp *b,
		     struct ib_cq *cq_b, void *buf, void *rbuf)
{
	const struct ib_recv_wr *bad_recv;
	struct ib_sge rsge = { .addr = (uintptr_t)rbuf, .length = 128, .lkey = pd->local_dma_lkey };
	struct ib_recv_wr recv = { .sg_list = &rsge, .num_sge = 1 };
	struct ib_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = pd->local_dma_lkey };
	struct ib_send_wr send = {
		.opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED, .sg_list = &sge, .num_sge = 1,
	};
	struct ib_wc wc;
	int st;

	if (ib_post_recv(b, &recv, &bad_recv))
		return -1;
	st = post_and_poll(a, cq_a, &send);
	if (st == IB_WC_SUCCESS && poll_one(cq_b, &wc) != 1)
		return -1;
	return st;
}

/*
 * A DMA MR (the PD's local_dma_lkey) names the kernel's direct map of RAM, where every virtual
 * DMA address lies: a SEND that gathers from a vmalloc address, which no DMA mapping gives, ends
 * in a local protection error and moves no byte; the same SEND from kmalloc memory succeeds.
 */
static void check_dma_range(struct ib_device *ibdev, struct ib_pd *pd)
{
	const struct ib_gid_attr *gid = roce_v2_ipv4_gid(ibdev);
	struct ib_cq *cq_a = NULL, *cq_b = NULL;
	struct ib_qp *a = NULL, *b = NULL;
	u8 *vbuf = vmalloc(PAGE_SIZE), *kbuf = kmalloc(64, GFP_KERNEL);
	u8 *rbuf = kzalloc(128, GFP_KERNEL);
	int st, n;

	cq_a = ib_alloc_cq(ibdev, NULL, 8, 0, IB_POLL_DIRECT);
	cq_b = ib_alloc_cq(ibdev, NULL, 8, 0, IB_POLL_DIRECT);
	if (IS_ERR(gid) || !vbuf || !kbuf || !rbuf || IS_ERR(cq_a) || IS_ERR(cq_b)) {
		verdict(false, "dma-range-setup", "no GID, memory or CQ");
		goto out;
	}
	memset(vbuf, 0x5a, PAGE_SIZE);
	memset(kbuf, 0xa5, 64);
	a = create_rc_qp(pd, cq_a);
	b = IS_ERR(a) ? ERR_PTR(-EINVAL) : create_rc_qp(pd, cq_b);
	n = IS_ERR(a) || IS_ERR(b) ? -EINVAL : connect_rc(a, b->qp_num, gid);
	if (!n)
		n = connect_rc(b, a->qp_num, gid);
	if (n) {
		verdict(false, "dma-range-setup", "RC pair: %d", n);
		goto out;
	}
	st = send_from(pd, a, cq_a, b, cq_b, kbuf, rbuf);
	verdict(st == IB_WC_SUCCESS && rbuf[0] == 0xa5, "dma-range-kmalloc", "status %d, byte %#x",
		st, rbuf[0]);
	memset(rbuf, 0, 128);
	st = send_from(pd, a, cq_a, b, cq_b, vbuf, rbuf);
	verdict(st == IB_WC_LOC_PROT_ERR && rbuf[0] == 0, "dma-range-vmalloc-refused",
		"status %d (want %d), byte %#x", st, IB_WC_LOC_PROT_ERR, rbuf[0]);
out:
	put_rc_pair(a, b, cq_a, cq_b);
	if (!IS_ERR(gid))
		rdma_put_gid_attr(gid);
	vfree(vbuf);
	kfree(kbuf);
	kfree(rbuf);
}

static void run_checks(struct ib_device *ibdev)
{
	struct ib_qp *a = NULL, *b;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_wc wc;
	u32 qpn;
	int n;

	result = 0;
	pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(pd)) {
		verdict(false, "alloc-pd", "%ld", PTR_ERR(pd));
		return;
	}
	check_fast_reg(ibdev, pd);
	check_dma_range(ibdev, pd);
	check_dereg_under_writes(ibdev, pd);
	cq = ib_alloc_cq(ibdev, NULL, 16, 0, IB_POLL_DIRECT);
	if (IS_ERR(cq)) {
		verdict(false, "alloc-cq", "%ld", PTR_ERR(cq));
		goto out_pd;
	}

	/* A completion polled while its QP lives names that QP. */
	a = create_ud_qp(pd, cq);
	if (IS_ERR(a)) {
		verdict(false, "create-qp", "%ld", PTR_ERR(a));
		goto out_cq;
	}
	n = flushed_recv(pd, a, WR_ID_LIVE);
	if (n) {
		verdict(false, "flush-live", "setup %d", n);
		goto out_a;
	}
	n = ib_poll_cq(cq, 1, &wc);
	verdict(n == 1 && wc.wr_id == WR_ID_LIVE && wc.status == IB_WC_WR_FLUSH_ERR && wc.qp == a,
		"wc-qp-live", "polled %d wr_id %llx status %d qp %s", n, n == 1 ? wc.wr_id : 0,
		n == 1 ? wc.status : -1, n == 1 && wc.qp == a ? "is the QP" : "is not the QP");
	ib_destroy_qp(a);

	/* A completion whose QP is gone, polled after its QP number went to another QP. */
	a = create_ud_qp(pd, cq);
	if (IS_ERR(a)) {
		verdict(false, "create-qp", "%ld", PTR_ERR(a));
		goto out_cq;
	}
	n = flushed_recv(pd, a, WR_ID_GONE);
	if (n) {
		verdict(false, "flush-gone", "setup %d", n);
		goto out_a;
	}
	qpn = a->qp_num;
	ib_destroy_qp(a);
	a = NULL;
	b = qp_with_number(pd, cq, qpn);
	verdict(b, "qpn-reuse", "QP number %u %s after %d creates (error %ld)", qpn,
		b ? "came back" : "did not come back", atomic_read(&hunt.created), hunt.err);
	if (b) {
		n = ib_poll_cq(cq, 1, &wc);
		verdict(n == 1 && wc.wr_id == WR_ID_GONE && wc.status == IB_WC_WR_FLUSH_ERR,
			"wc-gone-entry", "polled %d wr_id %llx status %d", n, n == 1 ? wc.wr_id : 0,
			n == 1 ? wc.status : -1);
		verdict(n == 1 && wc.qp != b, "wc-qp-not-reused", "qp %s",
			n != 1 ? "(no entry)" : wc.qp == b ? "is the QP that reused the number" :
			wc.qp ? "is another pointer" : "is NULL");
		ib_destroy_qp(b);
	}
	n = ib_poll_cq(cq, 1, &wc);
	verdict(n == 0, "cq-empty", "polled %d", n);
	goto out_cq;

out_a:
	ib_destroy_qp(a);
out_cq:
	ib_free_cq(cq);
out_pd:
	ib_dealloc_pd(pd);
}

static int check_add(struct ib_device *ibdev)
{
	if (strcmp(dev_name(&ibdev->dev), dev))
		return -EOPNOTSUPP;
	run_checks(ibdev);
	return 0;
}

static void check_remove(struct ib_device *ibdev, void *client_data)
{
}

static struct ib_client client = {
	.name = "roxe_kverbs_check",
	.add = check_add,
	.remove = check_remove,
};

static int __init kverbs_check_init(void)
{
	int ret = ib_register_client(&client);

	if (ret)
		return ret;
	/* The checks ran in check_add() for the device named, if it exists. */
	ib_unregister_client(&client);
	if (result == -ENODEV)
		pr_info("roxe_kverbs_check: FAIL device %s not found\n", dev);
	return result;
}

static void __exit kverbs_check_exit(void)
{
}

module_init(kverbs_check_init);
module_exit(kverbs_check_exit);
MODULE_DESCRIPTION("roxe test: kernel verbs consumer checks (ib_wc.qp, fast registration)");
MODULE_LICENSE("GPL");
