/*
 * rdma_ops: RDMA WRITE, READ, FETCH_AND_ADD and CMP_AND_SWAP over one RC QP,
 * then RDMA WRITE WITH IMMEDIATE, SEND WITH IMMEDIATE, and a SEND, a
 * multi-packet and a single-packet WRITE WITH IMMEDIATE that must each be
 * RNR-NAKed and retried, checked end to end. With -q the server's QP takes its
 * receives from an SRQ (the RNR steps then meet an empty SRQ). The server is the passive target
 * (it only posts receives); the client issues every operation. The out-of-band exchange over TCP is specified in
 * tests/interop/README.md ("rdma_ops protocol"); any change here must keep
 * that text true, because rocemu implements the other side from it.
 *
 *   server: rdma_ops [options]
 *   client: rdma_ops [options] SERVER_IPV4
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>

enum {
	ATOMIC_FA_OFF = 0,   /* FETCH_AND_ADD target word */
	ATOMIC_CS_OFF = 8,   /* CMP_AND_SWAP target word */
	DATA_OFF = 16,       /* WRITE and READ region */
	RECORD_LEN = 87,     /* 86 characters and a NUL */
};

#define FA_INITIAL UINT64_C(0x1000000000000000)
#define CS_MISS_SWAP UINT64_C(0xdeaddeaddeaddead)
/* Immediate values as numbers; on the wire (ImmDt) they are big-endian, and
 * ibverbs carries them in network byte order (htonl when posting, ntohl on
 * the completion). A byte-swapped value fails the check. */
#define IMM_WRITE UINT32_C(0x1a2b3c4d)
#define IMM_SEND UINT32_C(0x5e6f7081)
#define IMM_RNR_WRITE UINT32_C(0x2c3d4e5f)
#define IMM_RNR_WRITE1 UINT32_C(0x6b7c8d9e)   /* the single-packet RNR WRITE WITH IMM */
#define RNR_SEND_MAX 256u    /* the RNR SEND: one packet at any path MTU */

struct peer {
	uint16_t lid;
	uint32_t qpn;
	uint32_t psn;
	union ibv_gid gid;
	uint32_t rkey;
	uint64_t vaddr;
	uint32_t len;
};

struct opts {
	const char *dev;
	const char *server;
	int port_num;
	int gid_index;
	int tcp_port;
	uint32_t size;
	int iters;
	int mtu;
	int timeout_s;
	int srq;             /* -q: the server's receives go to an SRQ */
};

struct ctx {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_srq *srq; /* NULL: the QP has its own receive queue */
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t buf_len;
	enum ibv_mtu active_mtu;
	uint32_t path_mtu;   /* bytes, as used at RTR */
};

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [-d dev] [-i ib_port] [-g gid_index] [-p tcp_port] [-s bytes]\n"
		"          [-n iterations] [-m mtu] [-t timeout_s] [-q] [server_ipv4]\n"
		"defaults: first device, port 1, gid 1, tcp 18515, 4096 B, 10 iterations,\n"
		"          the port's active mtu, 30 s per completion; -q: the server's QP\n"
		"          receives from an SRQ\n", argv0);
}

static enum ibv_mtu mtu_to_enum(int mtu)
{
	switch (mtu) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	default: return 0;
	}
}

/* The byte written at offset j in iteration i: varies with both so a stale
 * or shifted buffer never matches. */
static uint8_t pattern(int i, size_t j)
{
	return (uint8_t)((size_t)i * 131u + j * 7u + (j >> 8) + 1u);
}

static void format_record(const struct peer *p, char out[RECORD_LEN])
{
	char gid[33];
	for (int i = 0; i < 16; i++)
		sprintf(gid + 2 * i, "%02x", p->gid.raw[i]);
	snprintf(out, RECORD_LEN, "%04x:%06x:%06x:%s:%08x:%016" PRIx64 ":%08x",
		 p->lid, p->qpn, p->psn, gid, p->rkey, p->vaddr, p->len);
}

static int parse_record(const char in[RECORD_LEN], struct peer *p)
{
	char gid[33];
	unsigned lid, qpn, psn, rkey, len;
	uint64_t vaddr;

	if (in[RECORD_LEN - 1] != '\0' || strlen(in) != RECORD_LEN - 1)
		return -1;
	if (sscanf(in, "%4x:%6x:%6x:%32[0-9a-f]:%8x:%16" SCNx64 ":%8x",
		   &lid, &qpn, &psn, gid, &rkey, &vaddr, &len) != 7 || strlen(gid) != 32)
		return -1;
	for (int i = 0; i < 16; i++) {
		unsigned b;
		if (sscanf(gid + 2 * i, "%2x", &b) != 1)
			return -1;
		p->gid.raw[i] = (uint8_t)b;
	}
	p->lid = (uint16_t)lid;
	p->qpn = qpn;
	p->psn = psn;
	p->rkey = rkey;
	p->vaddr = vaddr;
	p->len = len;
	return 0;
}

static int read_full(int fd, void *buf, size_t len)
{
	uint8_t *b = buf;
	while (len > 0) {
		ssize_t n = read(fd, b, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *b = buf;
	while (len > 0) {
		ssize_t n = write(fd, b, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

static int tcp_listen_accept(int port)
{
	int one = 1, ls, fd;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_ANY) };

	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0)
		return -1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1)) {
		perror("rdma_ops: bind/listen");
		close(ls);
		return -1;
	}
	fd = accept(ls, NULL, NULL);
	close(ls);
	return fd;
}

static int tcp_connect(const char *host, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd;

	if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		fprintf(stderr, "rdma_ops: '%s' is not an IPv4 address\n", host);
		return -1;
	}
	/* The server may still be starting: retry for a bounded time. */
	for (int attempt = 0; attempt < 100; attempt++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
			return fd;
		close(fd);
		usleep(100 * 1000);
	}
	perror("rdma_ops: connect");
	return -1;
}

static int open_ctx(const struct opts *o, struct ctx *c)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *dev = NULL;
	struct ibv_port_attr pattr;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

	if (!list || !list[0]) {
		fprintf(stderr, "rdma_ops: no RDMA device\n");
		return -1;
	}
	for (int i = 0; list[i]; i++)
		if (!o->dev || !strcmp(ibv_get_device_name(list[i]), o->dev)) {
			dev = list[i];
			break;
		}
	if (!dev) {
		fprintf(stderr, "rdma_ops: device '%s' not found\n", o->dev);
		ibv_free_device_list(list);
		return -1;
	}
	c->verbs = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!c->verbs || ibv_query_port(c->verbs, (uint8_t)o->port_num, &pattr)) {
		fprintf(stderr, "rdma_ops: cannot open device or query port %d\n", o->port_num);
		return -1;
	}
	c->active_mtu = pattr.active_mtu;
	c->buf_len = DATA_OFF + o->size;
	if (posix_memalign((void **)&c->buf, 4096, c->buf_len))
		return -1;
	memset(c->buf, 0, c->buf_len);
	c->pd = ibv_alloc_pd(c->verbs);
	c->mr = c->pd ? ibv_reg_mr(c->pd, c->buf, c->buf_len, access) : NULL;
	c->cq = c->mr ? ibv_create_cq(c->verbs, 16, NULL, NULL, 0) : NULL;
	if (!c->cq) {
		fprintf(stderr, "rdma_ops: pd/mr/cq setup failed: %s\n", strerror(errno));
		return -1;
	}
	/* Only a server with -q receives through an SRQ; a client never receives. */
	if (o->srq && !o->server) {
		struct ibv_srq_init_attr sia = { .attr = { .max_wr = 2, .max_sge = 1 } };
		c->srq = ibv_create_srq(c->pd, &sia);
		if (!c->srq) {
			fprintf(stderr, "rdma_ops: create_srq failed: %s\n", strerror(errno));
			return -1;
		}
	}
	struct ibv_qp_init_attr qia = {
		.send_cq = c->cq, .recv_cq = c->cq, .srq = c->srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = c->srq ? 0 : 2, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	c->qp = ibv_create_qp(c->pd, &qia);
	if (!c->qp) {
		fprintf(stderr, "rdma_ops: create_qp failed: %s\n", strerror(errno));
		return -1;
	}
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = (uint8_t)o->port_num,
		.qp_access_flags = access,
	};
	if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS)) {
		fprintf(stderr, "rdma_ops: modify_qp INIT failed\n");
		return -1;
	}
	return 0;
}

static int connect_qp(const struct opts *o, struct ctx *c, uint32_t my_psn,
		      const struct peer *rem)
{
	enum ibv_mtu mtu = o->mtu ? mtu_to_enum(o->mtu) : c->active_mtu;

	c->path_mtu = 128u << mtu;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = rem->qpn,
		.rq_psn = rem->psn, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1, .dlid = rem->lid, .sl = 0, .src_path_bits = 0,
			.port_num = (uint8_t)o->port_num,
			.grh = { .dgid = rem->gid, .sgid_index = (uint8_t)o->gid_index,
				 .hop_limit = 1 },
		},
	};
	if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER)) {
		fprintf(stderr, "rdma_ops: modify_qp RTR failed: %s\n", strerror(errno));
		return -1;
	}
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = my_psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
		fprintf(stderr, "rdma_ops: modify_qp RTS failed: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits (bounded by -t) for one completion and checks its status and opcode. */
static int wait_wc(const struct opts *o, struct ctx *c, struct ibv_wc *wc,
		   enum ibv_wc_opcode want, const char *what)
{
	double deadline = now_s() + o->timeout_s;
	int n;

	while ((n = ibv_poll_cq(c->cq, 1, wc)) == 0) {
		if (now_s() > deadline) {
			fprintf(stderr, "rdma_ops: %s: no completion within %d s\n", what,
				o->timeout_s);
			return -1;
		}
	}
	if (n < 0 || wc->status != IBV_WC_SUCCESS || wc->opcode != want) {
		if (n < 0)
			fprintf(stderr, "rdma_ops: %s: ibv_poll_cq failed\n", what);
		else
			fprintf(stderr, "rdma_ops: %s completed with status %s (%d), opcode %d\n",
				what, ibv_wc_status_str(wc->status), (int)wc->status, (int)wc->opcode);
		return -1;
	}
	return 0;
}

static int post_wr(struct ctx *c, struct ibv_send_wr *wr, const char *what)
{
	struct ibv_send_wr *bad;

	wr->send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(c->qp, wr, &bad)) {
		fprintf(stderr, "rdma_ops: post %s failed: %s\n", what, strerror(errno));
		return -1;
	}
	return 0;
}

/* Posts one signaled work request and waits for its completion. */
static int run_wr(const struct opts *o, struct ctx *c, struct ibv_send_wr *wr,
		  enum ibv_wc_opcode want, const char *what)
{
	struct ibv_wc wc;

	if (post_wr(c, wr, what))
		return -1;
	return wait_wc(o, c, &wc, want, what);
}

/* 0 if data[0..len) holds pattern(i, .), else says where it differs. */
static int check_pattern(const uint8_t *data, size_t len, int i, const char *what)
{
	for (size_t j = 0; j < len; j++)
		if (data[j] != pattern(i, j)) {
			fprintf(stderr, "rdma_ops: %s: byte %zu is 0x%02x, expected 0x%02x\n",
				what, j, data[j], pattern(i, j));
			return -1;
		}
	return 0;
}

static void fill_pattern(uint8_t *data, size_t len, int i)
{
	for (size_t j = 0; j < len; j++)
		data[j] = pattern(i, j);
}

/* The SEND WITH IMMEDIATE length: two full packets and a partial third
 * (3000 B at path MTU 1024), at most the region. */
static uint32_t send_imm_len(const struct opts *o, const struct ctx *c)
{
	uint32_t n = 3 * c->path_mtu - 72;
	return n < o->size ? n : o->size;
}

static uint32_t rnr_send_len(const struct opts *o)
{
	return o->size < RNR_SEND_MAX ? o->size : RNR_SEND_MAX;
}

/* 5-byte tokens of the TCP exchange ("DONE", "FAIL", "PASS", "SENT"). */
static int put_token(int fd, const char *t)
{
	return write_full(fd, t, 5);
}

static int get_token(int fd, const char *want, const char *step)
{
	char t[5];

	if (read_full(fd, t, 5)) {
		fprintf(stderr, "rdma_ops: %s: lost the peer\n", step);
		return -1;
	}
	if (t[4] != '\0' || strcmp(t, want)) {
		fprintf(stderr, "rdma_ops: %s: peer says %.4s\n", step, t);
		return -1;
	}
	return 0;
}

static int client_ops(const struct opts *o, struct ctx *c, const struct peer *rem)
{
	uint8_t *data = c->buf + DATA_OFF;
	uint64_t *result = (uint64_t *)c->buf;
	uint64_t fa_expect = FA_INITIAL;
	struct ibv_sge sge = { .lkey = c->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1 };
	double t0 = now_s();

	if (rem->len < DATA_OFF + o->size) {
		fprintf(stderr, "rdma_ops: server region is %u bytes, need %u\n", rem->len,
			DATA_OFF + o->size);
		return -1;
	}
	for (int i = 0; i < o->iters; i++) {
		fill_pattern(data, o->size, i);
		wr.opcode = IBV_WR_RDMA_WRITE;
		sge.addr = (uintptr_t)data;
		sge.length = o->size;
		wr.wr.rdma.remote_addr = rem->vaddr + DATA_OFF;
		wr.wr.rdma.rkey = rem->rkey;
		if (run_wr(o, c, &wr, IBV_WC_RDMA_WRITE, "RDMA WRITE"))
			return -1;

		memset(data, 0, o->size);
		wr.opcode = IBV_WR_RDMA_READ;
		if (run_wr(o, c, &wr, IBV_WC_RDMA_READ, "RDMA READ"))
			return -1;
		if (check_pattern(data, o->size, i, "RDMA READ"))
			return -1;

		sge.addr = (uintptr_t)result;
		sge.length = 8;
		*result = 0;
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = rem->vaddr + ATOMIC_FA_OFF;
		wr.wr.atomic.rkey = rem->rkey;
		wr.wr.atomic.compare_add = (uint64_t)i + 1;
		if (run_wr(o, c, &wr, IBV_WC_FETCH_ADD, "FETCH_AND_ADD"))
			return -1;
		if (*result != fa_expect) {
			fprintf(stderr, "rdma_ops: iteration %d: FETCH_AND_ADD returned 0x%" PRIx64
				", expected 0x%" PRIx64 "\n", i, *result, fa_expect);
			return -1;
		}
		fa_expect += (uint64_t)i + 1;

		/* A matching compare must swap; a stale one must not. */
		wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.remote_addr = rem->vaddr + ATOMIC_CS_OFF;
		wr.wr.atomic.compare_add = (uint64_t)i;
		wr.wr.atomic.swap = (uint64_t)i + 1;
		*result = ~UINT64_C(0);
		if (run_wr(o, c, &wr, IBV_WC_COMP_SWAP, "CMP_AND_SWAP"))
			return -1;
		if (*result != (uint64_t)i) {
			fprintf(stderr, "rdma_ops: iteration %d: CMP_AND_SWAP returned 0x%" PRIx64
				", expected 0x%x\n", i, *result, i);
			return -1;
		}
		wr.wr.atomic.compare_add = (uint64_t)i;
		wr.wr.atomic.swap = CS_MISS_SWAP;
		*result = ~UINT64_C(0);
		if (run_wr(o, c, &wr, IBV_WC_COMP_SWAP, "CMP_AND_SWAP (miss)"))
			return -1;
		if (*result != (uint64_t)i + 1) {
			fprintf(stderr, "rdma_ops: iteration %d: missing CMP_AND_SWAP returned 0x%"
				PRIx64 ", expected 0x%x\n", i, *result, i + 1);
			return -1;
		}
	}
	printf("rdma_ops: client: %d iterations of WRITE+READ %u B, FETCH_AND_ADD, "
	       "2x CMP_AND_SWAP ok in %.3f s\n", o->iters, o->size, now_s() - t0);
	return 0;
}

/* What the client's operations must have left in the server's region. */
static int server_check(const struct opts *o, const struct ctx *c)
{
	uint64_t fa, cs;
	uint64_t n = (uint64_t)o->iters;
	const uint8_t *data = c->buf + DATA_OFF;

	memcpy(&fa, c->buf + ATOMIC_FA_OFF, 8);
	memcpy(&cs, c->buf + ATOMIC_CS_OFF, 8);
	if (fa != FA_INITIAL + n * (n + 1) / 2) {
		fprintf(stderr, "rdma_ops: server: FETCH_AND_ADD word is 0x%" PRIx64
			", expected 0x%" PRIx64 "\n", fa, FA_INITIAL + n * (n + 1) / 2);
		return -1;
	}
	if (cs != n) {
		fprintf(stderr, "rdma_ops: server: CMP_AND_SWAP word is 0x%" PRIx64
			", expected 0x%" PRIx64 "\n", cs, n);
		return -1;
	}
	if (check_pattern(data, o->size, o->iters - 1, "server: region after the WRITEs"))
		return -1;
	printf("rdma_ops: server: region holds the last WRITE, FETCH_AND_ADD word 0x%" PRIx64
	       ", CMP_AND_SWAP word %" PRIu64 "\n", fa, cs);
	return 0;
}

/* Posts a request the server has no receive for yet, says SENT, and waits
 * for its completion: the responder RNR-NAKs it until the receive is posted. */
static int client_rnr_step(const struct opts *o, struct ctx *c, struct ibv_send_wr *wr, int fd,
			   const char *what)
{
	struct ibv_wc wc;
	enum ibv_wc_opcode want = wr->opcode == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;

	if (post_wr(c, wr, what) || put_token(fd, "SENT"))
		return -1;
	return wait_wc(o, c, &wc, want, what);
}

/*
 * Client, after the server's first PASS: RDMA WRITE WITH IMMEDIATE, SEND WITH
 * IMMEDIATE (multi-packet), then a SEND and a multi-packet WRITE WITH
 * IMMEDIATE each posted before the server has a receive for it, so that the
 * server must RNR-NAK it and this QP (rnr_retry 7) retry until it completes.
 * Each step waits for the server's token.
 */
static int client_imm_ops(const struct opts *o, struct ctx *c, const struct peer *rem, int fd)
{
	uint8_t *data = c->buf + DATA_OFF;
	struct ibv_sge sge = { .addr = (uintptr_t)data, .lkey = c->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1 };
	int n = o->iters;
	double t0 = now_s();

	fill_pattern(data, o->size, n);
	sge.length = o->size;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htonl(IMM_WRITE);
	wr.wr.rdma.remote_addr = rem->vaddr + DATA_OFF;
	wr.wr.rdma.rkey = rem->rkey;
	if (run_wr(o, c, &wr, IBV_WC_RDMA_WRITE, "RDMA WRITE WITH IMM") ||
	    get_token(fd, "PASS", "server's check of the WRITE WITH IMM"))
		return -1;

	sge.length = send_imm_len(o, c);
	fill_pattern(data, sge.length, n + 1);
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(IMM_SEND);
	if (run_wr(o, c, &wr, IBV_WC_SEND, "SEND WITH IMM") ||
	    get_token(fd, "PASS", "server's check of the SEND WITH IMM"))
		return -1;

	sge.length = rnr_send_len(o);
	fill_pattern(data, sge.length, n + 2);
	wr.opcode = IBV_WR_SEND;
	wr.imm_data = 0;
	if (client_rnr_step(o, c, &wr, fd, "SEND (RNR)") ||
	    get_token(fd, "PASS", "server's check of the RNR SEND"))
		return -1;

	/* Only the last packet consumes the receive: with size > path MTU the
	 * RNR NAK comes after the earlier packets' bytes are placed. */
	sge.length = o->size;
	fill_pattern(data, o->size, n + 3);
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htonl(IMM_RNR_WRITE);
	if (client_rnr_step(o, c, &wr, fd, "RDMA WRITE WITH IMM (RNR)") ||
	    get_token(fd, "PASS", "server's check of the RNR WRITE WITH IMM"))
		return -1;

	/* One packet (WRITE_ONLY_WITH_IMMEDIATE): the RNR NAK refuses the whole request. */
	sge.length = rnr_send_len(o);
	fill_pattern(data, sge.length, n + 4);
	wr.imm_data = htonl(IMM_RNR_WRITE1);
	if (client_rnr_step(o, c, &wr, fd, "single-packet RDMA WRITE WITH IMM (RNR)"))
		return -1;
	printf("rdma_ops: client: WRITE WITH IMM %u B, SEND WITH IMM %u B, RNR-retried SEND %u B and "
	       "WRITE WITH IMM %u B and %u B ok in %.3f s\n", o->size, send_imm_len(o, c),
	       rnr_send_len(o), o->size, rnr_send_len(o), now_s() - t0);
	return 0;
}

static int post_recv_region(const struct opts *o, struct ctx *c)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(c->buf + DATA_OFF), .length = o->size,
			       .lkey = c->mr->lkey };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;

	if (c->srq ? ibv_post_srq_recv(c->srq, &wr, &bad) : ibv_post_recv(c->qp, &wr, &bad)) {
		fprintf(stderr, "rdma_ops: server: post_recv failed: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/* Waits for the next receive completion and checks it: opcode, immediate
 * (want_imm < 0: none), byte_len and the pattern(i, .) bytes in the region. */
static int server_check_recv(const struct opts *o, struct ctx *c, enum ibv_wc_opcode op,
			     int64_t want_imm, uint32_t len, int i, const char *what)
{
	struct ibv_wc wc;
	int has_imm;

	if (wait_wc(o, c, &wc, op, what))
		return -1;
	has_imm = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
	if (has_imm != (want_imm >= 0) || (has_imm && ntohl(wc.imm_data) != (uint32_t)want_imm)) {
		fprintf(stderr, "rdma_ops: server: %s: immediate %s 0x%08x (wire order), expected %s "
			"0x%08x\n", what, has_imm ? "present" : "absent", ntohl(wc.imm_data),
			want_imm >= 0 ? "present" : "absent", (uint32_t)want_imm);
		return -1;
	}
	if (wc.byte_len != len) {
		fprintf(stderr, "rdma_ops: server: %s: byte_len %u, expected %u\n", what,
			wc.byte_len, len);
		return -1;
	}
	return check_pattern(c->buf + DATA_OFF, len, i, what);
}

/* The responder's count of RNR NAKs sent: rxe's send_rnr_err (-1 if unreadable). */
static long long rnr_naks_sent(const struct opts *o, const struct ctx *c)
{
	char path[256];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/hw_counters/send_rnr_err",
		 ibv_get_device_name(c->verbs->device), o->port_num);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* Server side of client_rnr_step: on SENT, waits (bounded) until this side has
 * RNR-NAKed the request (its count of RNR NAKs sent rose above rnr_before),
 * then posts the receive that lets the retry land and checks it. */
static int server_rnr_step(const struct opts *o, struct ctx *c, int fd, long long rnr_before,
			   enum ibv_wc_opcode op, int64_t want_imm, uint32_t len, int i,
			   const char *what)
{
	double deadline = now_s() + o->timeout_s;

	if (get_token(fd, "SENT", what))
		return -1;
	if (rnr_before < 0)
		fprintf(stderr, "rdma_ops: server: send_rnr_err unreadable, not waiting for an RNR NAK\n");
	while (rnr_before >= 0 && rnr_naks_sent(o, c) <= rnr_before) {
		if (now_s() > deadline) {
			fprintf(stderr, "rdma_ops: server: %s: no RNR NAK sent within %d s\n", what,
				o->timeout_s);
			return -1;
		}
		usleep(1000);
	}
	if (post_recv_region(o, c))
		return -1;
	return server_check_recv(o, c, op, want_imm, len, i, what);
}

/* Server side of client_imm_ops; a receive for the WRITE WITH IMM is already posted. */
static int server_imm_ops(const struct opts *o, struct ctx *c, int fd)
{
	int n = o->iters, ok;
	long long rnr_before, rnr_mid, rnr_mid2;

	ok = server_check_recv(o, c, IBV_WC_RECV_RDMA_WITH_IMM, IMM_WRITE, o->size, n,
			       "RDMA WRITE WITH IMM") == 0 && post_recv_region(o, c) == 0;
	if (put_token(fd, ok ? "PASS" : "FAIL") || !ok)
		return -1;
	ok = server_check_recv(o, c, IBV_WC_RECV, IMM_SEND, send_imm_len(o, c), n + 1,
			       "SEND WITH IMM") == 0;
	/* Read before the client may send: the PASS below lets it. */
	rnr_before = rnr_naks_sent(o, c);
	if (put_token(fd, ok ? "PASS" : "FAIL") || !ok)
		return -1;
	ok = server_rnr_step(o, c, fd, rnr_before, IBV_WC_RECV, -1, rnr_send_len(o), n + 2,
			     "SEND (RNR)") == 0;
	rnr_mid = rnr_naks_sent(o, c);
	if (put_token(fd, ok ? "PASS" : "FAIL") || !ok)
		return -1;
	ok = server_rnr_step(o, c, fd, rnr_mid, IBV_WC_RECV_RDMA_WITH_IMM, IMM_RNR_WRITE, o->size,
			     n + 3, "RDMA WRITE WITH IMM (RNR)") == 0;
	rnr_mid2 = rnr_naks_sent(o, c);
	if (put_token(fd, ok ? "PASS" : "FAIL") || !ok)
		return -1;
	if (server_rnr_step(o, c, fd, rnr_mid2, IBV_WC_RECV_RDMA_WITH_IMM, IMM_RNR_WRITE1,
			    rnr_send_len(o), n + 4, "single-packet RDMA WRITE WITH IMM (RNR)"))
		return -1;
	printf("rdma_ops: server%s: WRITE WITH IMM, SEND WITH IMM and the RNR-retried SEND and "
	       "WRITE WITH IMM (multi- and single-packet) arrived intact (%lld + %lld + %lld RNR NAKs "
	       "sent)\n", c->srq ? " (SRQ)" : "",
	       rnr_before < 0 ? -1 : rnr_mid - rnr_before,
	       rnr_before < 0 ? -1 : rnr_mid2 - rnr_mid,
	       rnr_before < 0 ? -1 : rnr_naks_sent(o, c) - rnr_mid2);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { .port_num = 1, .gid_index = 1, .tcp_port = 18515, .size = 4096,
			  .iters = 10, .timeout_s = 30 };
	struct ctx c = { 0 };
	struct peer me = { 0 }, rem;
	char rec[RECORD_LEN];
	int opt, fd, ok;

	while ((opt = getopt(argc, argv, "d:i:g:p:s:n:m:t:qh")) != -1) {
		switch (opt) {
		case 'd': o.dev = optarg; break;
		case 'i': o.port_num = atoi(optarg); break;
		case 'g': o.gid_index = atoi(optarg); break;
		case 'p': o.tcp_port = atoi(optarg); break;
		case 's': o.size = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'n': o.iters = atoi(optarg); break;
		case 'm': o.mtu = atoi(optarg); break;
		case 't': o.timeout_s = atoi(optarg); break;
		case 'q': o.srq = 1; break;
		default: usage(argv[0]); return 2;
		}
	}
	if (optind < argc)
		o.server = argv[optind];
	if (o.size < 1 || o.size > (1u << 30) || o.iters < 1 || o.timeout_s < 1 ||
	    (o.mtu && !mtu_to_enum(o.mtu)) || o.tcp_port < 1 || o.tcp_port > 65535) {
		fprintf(stderr, "rdma_ops: -s must be 1..2^30, -n and -t >= 1, -p 1..65535, "
			"-m one of 256 512 1024 2048 4096\n");
		return 2;
	}

	/* A peer that gives up closes the socket; fail on the write, not by SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	if (open_ctx(&o, &c))
		return 1;
	if (ibv_query_gid(c.verbs, (uint8_t)o.port_num, o.gid_index, &me.gid)) {
		fprintf(stderr, "rdma_ops: cannot read gid %d\n", o.gid_index);
		return 1;
	}
	srand48(getpid() ^ (long)time(NULL));
	me.qpn = c.qp->qp_num;
	me.psn = (uint32_t)lrand48() & 0xffffff;
	me.rkey = c.mr->rkey;
	me.vaddr = (uintptr_t)c.buf;
	me.len = (uint32_t)c.buf_len;
	if (!o.server) {
		uint64_t fa = FA_INITIAL;
		memcpy(c.buf + ATOMIC_FA_OFF, &fa, 8);
	}
	format_record(&me, rec);

	if (o.server) {
		fd = tcp_connect(o.server, o.tcp_port);
		if (fd < 0 || write_full(fd, rec, RECORD_LEN) || read_full(fd, rec, RECORD_LEN) ||
		    parse_record(rec, &rem)) {
			fprintf(stderr, "rdma_ops: exchange with %s failed\n", o.server);
			return 1;
		}
		if (connect_qp(&o, &c, me.psn, &rem))
			return 1;
		ok = client_ops(&o, &c, &rem) == 0;
		if (put_token(fd, ok ? "DONE" : "FAIL") ||
		    get_token(fd, "PASS", "server's check of its region")) {
			close(fd);
			return 1;
		}
		ok = client_imm_ops(&o, &c, &rem, fd) == 0;
		if (put_token(fd, ok ? "DONE" : "FAIL") || get_token(fd, "PASS", "server verdict"))
			ok = 0;
	} else {
		fd = tcp_listen_accept(o.tcp_port);
		if (fd < 0 || read_full(fd, rec, RECORD_LEN) || parse_record(rec, &rem)) {
			fprintf(stderr, "rdma_ops: exchange with the client failed\n");
			return 1;
		}
		if (connect_qp(&o, &c, me.psn, &rem))
			return 1;
		format_record(&me, rec);
		if (write_full(fd, rec, RECORD_LEN)) {
			fprintf(stderr, "rdma_ops: lost the client\n");
			return 1;
		}
		ok = get_token(fd, "DONE", "client's operations") == 0 && server_check(&o, &c) == 0 &&
		     post_recv_region(&o, &c) == 0;
		if (put_token(fd, ok ? "PASS" : "FAIL") || !ok) {
			close(fd);
			return 1;
		}
		ok = server_imm_ops(&o, &c, fd) == 0 &&
		     get_token(fd, "DONE", "client's immediate and RNR operations") == 0;
		put_token(fd, ok ? "PASS" : "FAIL");
	}
	close(fd);
	printf("rdma_ops: %s %s\n", o.server ? "client" : "server", ok ? "PASS" : "FAIL");
	ibv_destroy_qp(c.qp);
	if (c.srq)
		ibv_destroy_srq(c.srq);
	ibv_destroy_cq(c.cq);
	ibv_dereg_mr(c.mr);
	ibv_dealloc_pd(c.pd);
	ibv_close_device(c.verbs);
	free(c.buf);
	return ok ? 0 : 1;
}
