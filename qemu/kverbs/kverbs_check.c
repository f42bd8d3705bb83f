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
 * The result is the module's load: insmod fails (EIO) when a check fails, and the kernel log
 * says which (lines "roxe_kverbs_check: PASS|FAIL <name> ...").
 *
 *   insmod roxe_kverbs_check.ko dev=roxe0
 */

#include <linux/module.h>
#include <linux/delay.h>
#include <linux/sched.h>
#include <linux/workqueue.h>
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
MODULE_DESCRIPTION("roxe test: kernel verbs consumer checks (ib_wc.qp)");
MODULE_LICENSE("GPL");
